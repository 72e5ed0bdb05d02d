// GET /workspaces/:id/archive: the tree (or a subtree) as a tar.gz, streamed as it is read. Entries record
// uid/gid 0 and no user names (no host uid leaks), permission bits only (never setuid), links as links
// (their target text; never followed), and no special files. Read through the nosymfollow view with
// O_NOFOLLOW | O_NONBLOCK: a run swapping a file for a link or a FIFO mid-download cannot make Berth follow
// it or block on it; the file is then left out.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { pack as tarPack, type Pack } from 'tar-stream';
import { errors } from '../../errors.js';
import { isCode, scanTree, type TreeEntry } from './tree-scan.js';
import type { OpenWorkspace } from './open-workspace.js';
import type { WorkspacePath } from './workspace-paths.js';

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CHUNK = 64 * 1024;

/** A tar.gz of the workspace's directory `path` (404 when absent, 400 when it is not a directory or passes through a link). */
export async function packWorkspace(ws: Pick<OpenWorkspace, 'tree'>, path: WorkspacePath): Promise<Readable> {
  const root = path.segments.length === 0 ? ws.tree : join(ws.tree, ...path.segments);
  const shown = path.text === '' ? '/' : path.text;
  try {
    const handle = await open(root, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    await handle.close();
  } catch (error) {
    if (isCode(error, 'ENOENT')) throw errors.notFound(`file ${shown}`);
    if (isCode(error, 'ENOTDIR')) throw errors.invalid(`path: "${shown}" is not a directory; download a file with GET /workspaces/{id}/files/{path}`);
    if (isCode(error, 'ELOOP')) throw errors.invalid(`path: "${shown}" is or passes through a symbolic link; links are never followed`);
    throw error;
  }
  return packDirectory(root);
}

/**
 * A tar.gz of the directory `root` (a host path on the view), entries named relative to it. The stream ends
 * when the walk is done; an error while reading destroys it with that error.
 */
export function packDirectory(root: string): Readable {
  const pack = tarPack();
  const gzip = createGzip();
  // A client that goes away closes the response and with it `gzip`: the walk stops and closes its file
  // (a reader left waiting for 'drain' would hold a file of the disk open, and the disk could not unmount).
  const gone = new AbortController();
  gzip.on('close', () => gone.abort());
  (pack as unknown as Readable).pipe(gzip);
  pack.on('error', (error: Error) => gzip.destroy(error));
  void writeEntries(pack, root, gone.signal).then(
    () => pack.finalize(),
    (error: unknown) => {
      pack.destroy(error as Error);
      gzip.destroy(error as Error);
    },
  );
  return gzip;
}

async function writeEntries(pack: Pack, root: string, signal: AbortSignal): Promise<void> {
  for (const entry of await scanTree(root)) {
    signal.throwIfAborted();
    const common = { name: entry.path, mtime: new Date(entry.mtimeMs), uid: 0, gid: 0, uname: '', gname: '' };
    if (entry.type === 'directory') {
      await addEntry(pack, { ...common, type: 'directory', mode: entry.mode & 0o777 }, signal);
    } else if (entry.type === 'symlink') {
      await addEntry(pack, { ...common, type: 'symlink', mode: 0o777, linkname: entry.target ?? '' }, signal);
    } else if (entry.type === 'file') {
      await addFile(pack, root, entry, common, signal);
    }
    // Anything else (a FIFO, a socket, a device a run made) is left out.
  }
}

function addEntry(pack: Pack, header: Parameters<Pack['entry']>[0], signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () => reject(signal.reason);
    signal.addEventListener('abort', aborted, { once: true });
    endSink(
      quiet(
        pack.entry(header, (error) => {
          signal.removeEventListener('abort', aborted);
          if (error) reject(error);
          else resolve();
        }),
      ),
    );
  });
}

async function addFile(pack: Pack, root: string, entry: TreeEntry, common: Parameters<Pack['entry']>[0], signal: AbortSignal): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await open(join(root, entry.path), READ_FLAGS);
  } catch (error) {
    // Gone or swapped for a link (ELOOP on the view) or a FIFO with no writer (ENXIO) since the walk.
    if (isCode(error, 'ENOENT') || isCode(error, 'ELOOP') || isCode(error, 'ENXIO') || isCode(error, 'ENOTDIR')) return;
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return;
    const size = stats.size;
    let settled: (error?: Error | null) => void = () => undefined;
    const written = new Promise<void>((resolve, reject) => {
      const aborted = () => reject(signal.reason);
      signal.addEventListener('abort', aborted, { once: true });
      settled = (error) => {
        signal.removeEventListener('abort', aborted);
        if (error) reject(error);
        else resolve();
      };
    });
    written.catch(() => undefined); // awaited below, or abandoned with the walk when the client left
    const sink = quiet(pack.entry({ ...common, type: 'file', mode: stats.mode & 0o777, size, mtime: stats.mtime }, (error) => settled(error)));
    // Exactly `size` bytes, as the header says: a file that shrank meanwhile is padded with zeros, one that
    // grew is cut (the archive stays well-formed either way).
    const buffer = Buffer.alloc(CHUNK);
    let done = 0;
    while (done < size) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(CHUNK, size - done), done);
      const chunk = bytesRead === 0 ? Buffer.alloc(Math.min(CHUNK, size - done)) : Buffer.from(buffer.subarray(0, bytesRead));
      done += chunk.length;
      signal.throwIfAborted();
      if (!sink.write(chunk)) await once(sink as unknown as NodeJS.EventEmitter, 'drain', { signal });
    }
    endSink(sink);
    await written;
  } finally {
    await handle.close();
  }
}

/** tar-stream's entry sinks are streamx Writables; `end()` without data is valid there, only its typing asks for one. */
function endSink(sink: ReturnType<Pack['entry']>): void {
  (sink as unknown as NodeJS.WritableStream).end();
}

/** An entry's failure reaches its callback; the sink's own 'error' event (a pack destroyed under it) must not go unhandled. */
function quiet<T extends ReturnType<Pack['entry']>>(sink: T): T {
  sink.on('error', () => undefined);
  return sink;
}
