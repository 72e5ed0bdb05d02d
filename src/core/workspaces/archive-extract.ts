// POST /workspaces/:id/archive: a tar or tar.gz uploaded raw lands in the tree whole or not at all.
// 1. The body streams into `.berth/tmp` (never held in memory; a full disk hits the temporary file).
// 2. Pass 1 reads every header and refuses the archive (400 naming the entry) before anything is written:
//    archive-entries.ts's checks, the expansion ratio, the entry count, the declared bytes.
// 3. Pass 2 extracts into a staging directory beside the tree (same file system), as Berth's file owner with
//    normalised modes; a full disk answers 413 and the tree is untouched.
// 4. Conflicts with the tree (a directory where the archive has a file, a link in a path) are found before
//    the first move; then each new top-level name is moved in with one rename (a file replacing one of the
//    same path). Everything goes through the workspace's nosymfollow view, so no path resolves through a link.
import { constants, createReadStream } from 'node:fs';
import { lstat, lchown, lutimes, mkdir, open, readdir, rename, rm, statfs, symlink, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract as tarExtract } from 'tar-stream';
import { BerthError, errors } from '../../errors.js';
import { checkEntry, checkTogether, refuseEntry, type ArchiveEntry, type EntryHeader } from './archive-entries.js';
import { entryType, isCode, scanTree } from './tree-scan.js';
import type { OpenWorkspace } from './open-workspace.js';
import type { WorkspacePath } from './workspace-paths.js';

export interface ArchiveLimits {
  /** SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO: unpacked tar bytes per uploaded byte. */
  readonly maxArchiveRatio: number;
}

export interface ExtractResult {
  /** Regular files written (a path the archive names twice counts once). */
  readonly files: number;
  /** Their bytes. */
  readonly bytes: number;
}

/**
 * Below this many unpacked bytes the ratio is not checked: a tar pads to 10 KiB records, so a tar.gz of a
 * few empty files unpacks ~60x; the limit is there for the archive that unpacks to gigabytes, not for that.
 */
export const RATIO_FREE_BYTES = 1024 * 1024;

type ExtractWorkspace = Pick<OpenWorkspace, 'id' | 'tree' | 'internal' | 'maxBytes' | 'maxFiles' | 'fileOwner' | 'fileCount'>;

const WRITE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const WRITE_REPLACE = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
/** Files written at once while staging, and the largest file held in memory for that (at most WRITERS x 1 MiB). */
const WRITERS = 16;
const BUFFERED_FILE_BYTES = 1024 * 1024;

/** Extracts the archive `body` below `destination` of the tree (see the file's comment). */
export async function extractArchive(
  ws: ExtractWorkspace,
  destination: WorkspacePath,
  body: Readable,
  options: ArchiveLimits & { contentLength?: number },
): Promise<ExtractResult> {
  const tmp = join(ws.internal, 'tmp');
  await mkdir(tmp, { recursive: true, mode: 0o700 });
  const id = randomUUID();
  const upload = join(tmp, `archive-${id}`);
  const staging = join(tmp, `extract-${id}`);
  try {
    const packedBytes = await receive(ws, body, upload, options.contentLength);
    const entries = await checkArchive(ws, upload, packedBytes, destination, options.maxArchiveRatio);
    await mkdir(staging, { mode: 0o700 });
    await stage(ws, upload, staging, destination);
    const moves = await planMoves(ws, staging);
    await applyMoves(ws, moves);
    return summarize(entries);
  } finally {
    await rm(upload, { force: true });
    await rm(staging, { recursive: true, force: true });
  }
}

async function receive(ws: ExtractWorkspace, body: Readable, file: string, contentLength: number | undefined): Promise<number> {
  if (contentLength !== undefined) {
    const space = await statfs(ws.internal);
    const free = space.bavail * space.bsize;
    if (contentLength > free) throw errors.workspaceFull(ws.id, `the ${contentLength}-byte archive does not fit in the ${free} bytes left`);
  }
  let bytes = 0;
  try {
    // O_EXCL | O_NOFOLLOW: a fresh name in .berth/tmp. The stream closes the file (also when it fails).
    const handle = await open(file, WRITE_NEW, 0o600);
    // Counted once the pipeline is set up: a 'data' listener starts the flow.
    const count = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        bytes += chunk.length;
        done(null, chunk);
      },
    });
    await pipeline(body, count, handle.createWriteStream());
  } catch (error) {
    if (isCode(error, 'ENOSPC') || isCode(error, 'EDQUOT')) throw errors.workspaceFull(ws.id, 'the archive does not fit');
    throw error;
  }
  if (bytes === 0) throw errors.invalid('archive: the request body is empty; send a tar or tar.gz archive');
  return bytes;
}

/** Pass 1: every entry checked, alone and together; nothing written. */
async function checkArchive(
  ws: ExtractWorkspace,
  file: string,
  packedBytes: number,
  destination: WorkspacePath,
  maxArchiveRatio: number,
): Promise<ArchiveEntry[]> {
  const entries: ArchiveEntry[] = [];
  const context = { prefix: destination.segments };
  let declaredBytes = 0;
  const maxUnpacked = Math.max(RATIO_FREE_BYTES, Math.floor(packedBytes * maxArchiveRatio));
  await readArchive(file, maxUnpacked, maxArchiveRatio, async (header, content) => {
    const entry = checkEntry(header, context);
    content.resume();
    if (entry === undefined) return;
    entries.push(entry);
    if (entries.length > ws.maxFiles) {
      throw refuseEntry(header.name, `the archive has more than ${ws.maxFiles} entries (SERVICE_WORKSPACE_MAX_FILES)`);
    }
    declaredBytes += entry.size;
    if (declaredBytes > ws.maxBytes) {
      throw errors.workspaceFull(ws.id, `the archive's files add up to more than ${ws.maxBytes} bytes (at entry "${header.name}")`);
    }
  });
  checkTogether(entries);
  return entries;
}

/**
 * Pass 2: the checked archive written into `staging` (which stands for the tree's root). Files up to
 * BUFFERED_FILE_BYTES are read from the archive into memory and written by up to WRITERS at once (a file
 * costs open, write, chown, chmod, utimes and close: one after the other, 10,000 small files took ~9 s;
 * overlapped, ~3 s); larger ones are streamed in turn. Writes to one path keep the archive's order.
 */
async function stage(ws: ExtractWorkspace, file: string, staging: string, destination: WorkspacePath): Promise<void> {
  const context = { prefix: destination.segments };
  const made = new Set<string>();
  const makeDirectory = async (segments: readonly string[]): Promise<void> => {
    for (let depth = 1; depth <= segments.length; depth += 1) {
      const relative = segments.slice(0, depth).join('/');
      if (made.has(relative)) continue;
      const dir = join(staging, relative);
      await mkdir(dir, { mode: 0o700 });
      await lchown(dir, ws.fileOwner.uid, ws.fileOwner.gid);
      const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      try {
        await handle.chmod(0o755);
      } finally {
        await handle.close();
      }
      made.add(relative);
    }
  };
  const writing = new Map<string, Promise<void>>(); // the last write of each path
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  const afterWritesTo = async (path: string): Promise<void> => {
    await writing.get(path);
  };
  const schedule = async (path: string, write: () => Promise<void>): Promise<void> => {
    const job: Promise<void> = afterWritesTo(path)
      .then(write)
      .catch((error: unknown) => {
        failure ??= error;
      })
      .finally(() => {
        inFlight.delete(job);
        if (writing.get(path) === job) writing.delete(path);
      });
    writing.set(path, job);
    inFlight.add(job);
    while (inFlight.size >= WRITERS) await Promise.race(inFlight);
    if (failure !== undefined) throw failure;
  };
  try {
    // The prefix directories are staged too: moved into the tree when it lacks them, else merged.
    await makeDirectory(destination.segments);
    await readArchive(file, Number.MAX_SAFE_INTEGER, 0, async (header, content) => {
      const entry = checkEntry(header, context);
      if (entry === undefined) {
        content.resume();
        return;
      }
      const target = join(staging, entry.path);
      if (entry.type === 'directory') {
        content.resume();
        await makeDirectory(entry.segments);
        return;
      }
      await makeDirectory(entry.segments.slice(0, -1));
      if (entry.type === 'symlink') {
        content.resume();
        await afterWritesTo(entry.path);
        await rm(target, { force: true }); // named twice: the later entry wins, as with tar
        await symlink(entry.target as string, target);
        await lchown(target, ws.fileOwner.uid, ws.fileOwner.gid);
        if (entry.mtime) await lutimes(target, entry.mtime, entry.mtime);
        return;
      }
      if (entry.size <= BUFFERED_FILE_BYTES) {
        const chunks: Buffer[] = [];
        for await (const chunk of content) chunks.push(chunk as Buffer);
        const data = Buffer.concat(chunks);
        await schedule(entry.path, () => writeStagedFile(ws, target, entry, async (handle) => writeAll(handle, data)));
        return;
      }
      await afterWritesTo(entry.path);
      await writeStagedFile(ws, target, entry, async (handle) => {
        for await (const chunk of content) await writeAll(handle, chunk as Buffer);
      });
    });
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
  } catch (error) {
    if (isCode(error, 'ENOSPC') || isCode(error, 'EDQUOT')) throw errors.workspaceFull(ws.id, 'the archive\'s files do not fit');
    throw error;
  } finally {
    // Nothing may still be writing into the staging directory when the caller removes it.
    await Promise.allSettled(inFlight);
  }
}

async function writeStagedFile(ws: ExtractWorkspace, target: string, entry: ArchiveEntry, write: (handle: FileHandle) => Promise<void>): Promise<void> {
  const handle = await open(target, WRITE_REPLACE, 0o600);
  try {
    await write(handle);
    await handle.chown(ws.fileOwner.uid, ws.fileOwner.gid);
    await handle.chmod(entry.mode);
    if (entry.mtime) await handle.utimes(entry.mtime, entry.mtime);
  } finally {
    await handle.close();
  }
}

async function writeAll(handle: FileHandle, chunk: Buffer): Promise<void> {
  let done = 0;
  while (done < chunk.length) done += (await handle.write(chunk, done, chunk.length - done)).bytesWritten;
}

interface Move {
  readonly from: string;
  readonly to: string;
}

/**
 * The renames that put the staged files into the tree, found before any is made: a staged name the tree
 * lacks moves whole; a staged directory the tree has is merged; a staged file or link replaces the tree's
 * file or link. Refused: a directory against a non-directory, and any path through a link in the tree
 * (lstat on the view answers ELOOP for it). 413 when the new entries would pass maxFiles.
 */
async function planMoves(ws: ExtractWorkspace, staging: string): Promise<Move[]> {
  const moves: Move[] = [];
  let added = 0;
  const visit = async (relative: string): Promise<void> => {
    const names = await readdir(relative === '' ? staging : join(staging, relative));
    for (const name of names) {
      const path = relative === '' ? name : `${relative}/${name}`;
      const from = join(staging, path);
      const to = join(ws.tree, path);
      const staged = await lstat(from);
      let existing: Stats | undefined;
      try {
        existing = await lstat(to);
      } catch (error) {
        if (isCode(error, 'ELOOP')) throw refuseEntry(path, 'lies below a symbolic link in the workspace; links are never followed');
        if (!isCode(error, 'ENOENT')) throw error;
      }
      if (existing === undefined) {
        moves.push({ from, to });
        added += staged.isDirectory() ? 1 + (await scanTree(from)).length : 1;
      } else if (staged.isDirectory()) {
        if (!existing.isDirectory()) throw refuseEntry(path, `is a directory in the archive and a ${entryType(existing)} in the workspace; delete it first`);
        await visit(path);
      } else {
        if (existing.isDirectory()) throw refuseEntry(path, `is a ${entryType(staged)} in the archive and a directory in the workspace; delete it first`);
        moves.push({ from, to });
      }
    }
  };
  await visit('');
  if (ws.fileCount + added > ws.maxFiles) {
    throw errors.workspaceFull(ws.id, `the archive adds ${added} files and directories to the ${ws.fileCount} there, more than ${ws.maxFiles}`);
  }
  return moves;
}

async function applyMoves(ws: ExtractWorkspace, moves: readonly Move[]): Promise<void> {
  for (const move of moves) {
    try {
      await rename(move.from, move.to);
    } catch (error) {
      const path = move.to.slice(ws.tree.length + 1);
      if (isCode(error, 'ELOOP')) throw refuseEntry(path, 'lies below a symbolic link in the workspace; links are never followed');
      if (isCode(error, 'ENOSPC')) throw errors.workspaceFull(ws.id, `no room left to add "${path}"`);
      throw error;
    }
  }
}

function summarize(entries: readonly ArchiveEntry[]): ExtractResult {
  const files = new Map<string, number>();
  for (const entry of entries) {
    if (entry.type === 'file') files.set(entry.path, entry.size);
    else files.delete(entry.path);
  }
  let bytes = 0;
  for (const size of files.values()) bytes += size;
  return { files: files.size, bytes };
}

/**
 * Reads the archive in `file` (gzip detected by its magic), calling `visit` for each entry in order with
 * a stream of its content that `visit` consumes. Stops at `maxUnpacked` tar bytes (the expansion ratio),
 * naming the entry being read. Broken gzip or tar data is a 400.
 */
async function readArchive(
  file: string,
  maxUnpacked: number,
  ratio: number,
  visit: (header: EntryHeader, content: Readable) => Promise<void>,
): Promise<void> {
  const compressed = await isGzip(file);
  const source = createReadStream(file);
  const stages: NodeJS.ReadWriteStream[] = compressed ? [createGunzip()] : [];
  let unpacked = 0;
  let overRatio = false;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      unpacked += chunk.length;
      if (unpacked > maxUnpacked) {
        overRatio = true;
        done(new Error('expansion ratio exceeded'));
        return;
      }
      done(null, chunk);
    },
  });
  const parser = tarExtract();
  let failedIn: 'gzip' | 'tar' | undefined;
  let current = '(the first header)';
  const chain: Readable[] = [source, ...(stages as unknown as Readable[]), counter];
  for (const [index, stream] of chain.entries()) {
    const next = chain[index + 1];
    if (next) stream.pipe(next as unknown as NodeJS.WritableStream);
    stream.on('error', (error: Error) => {
      if (stream !== source && stream !== counter) failedIn ??= 'gzip';
      parser.destroy(error);
    });
  }
  counter.pipe(parser as unknown as NodeJS.WritableStream);
  try {
    // tar-stream's 'entry' events, not its async iterator: the iterator cost ~0.1 ms per entry (1 s of 10,000).
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (error: unknown): void => {
        if (settled) return;
        settled = true;
        reject(error);
      };
      let visiting: Promise<void> = Promise.resolve();
      parser.on('entry', (header, content, next) => {
        current = header.name;
        content.on('error', () => undefined); // reaches `visit` (reading it) or the parser's 'error'
        let ended = false;
        let visited = false;
        const proceed = (): void => {
          if (ended && visited && !settled) next();
        };
        content.on('end', () => {
          ended = true;
          proceed();
        });
        visiting = visit(header, content as unknown as Readable);
        visiting.then(() => {
          visited = true;
          proceed();
        }, fail);
      });
      parser.on('error', fail);
      parser.on('finish', () => {
        if (settled) return;
        settled = true;
        resolve();
      });
      // A visit that fails while reading its entry (a full disk) closes the parser under it: its own error wins.
      parser.on('close', () => {
        void visiting.catch(() => undefined).then(() => fail(new Error('the archive ended before its last entry')));
      });
    });
  } catch (error) {
    if (error instanceof BerthError) throw error;
    if (overRatio) {
      throw refuseEntry(current, `unpacks the archive past ${ratio} times its uploaded size (SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO)`);
    }
    if (isCode(error, 'ENOSPC') || isCode(error, 'EDQUOT') || isCode(error, 'ELOOP')) throw error;
    failedIn ??= 'tar';
    const what = failedIn === 'gzip' ? 'not valid gzip data' : 'not a valid tar archive';
    throw errors.invalid(`archive: ${what} (${(error as Error).message}) at entry "${current}"; nothing of this archive was written`);
  } finally {
    for (const stream of chain) stream.destroy();
    parser.destroy();
  }
}

async function isGzip(file: string): Promise<boolean> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const magic = Buffer.alloc(2);
    const { bytesRead } = await handle.read(magic, 0, 2, 0);
    return bytesRead === 2 && magic[0] === 0x1f && magic[1] === 0x8b;
  } finally {
    await handle.close();
  }
}
