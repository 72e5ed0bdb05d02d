// The files API's operations on one open workspace, all through its nosymfollow view (OpenWorkspace.tree):
// the kernel refuses any symlink in any component of a path (ELOOP), so a link a run planted, or a directory
// a run swaps for a link mid-request, can never take an operation outside the tree. Files are opened with
// O_NOFOLLOW | O_NONBLOCK and fstat'ed: a FIFO opens without blocking and is refused like any other
// special file. Uploads are written into `.berth/tmp` first and renamed into place, so a full disk hits
// the staging copy and the tree keeps its old file.
import { constants, createReadStream, type ReadStream, type Stats } from 'node:fs';
import { lstat, mkdir, open, opendir, rename, rm, rmdir, statfs, type FileHandle } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { errors } from '../../errors.js';
import { entryType, isCode, scanTree, type EntryType } from './tree-scan.js';
import type { WorkspacePath } from './workspace-paths.js';

/** The parts of an open workspace (open-workspace.ts's OpenWorkspace) the file operations use. */
export interface FilesWorkspace {
  readonly id: string;
  readonly tree: string;
  readonly internal: string;
  readonly maxFiles: number;
  readonly fileOwner: { readonly uid: number; readonly gid: number };
  readonly fileCount: number;
  /** Reports what a write changed, so the tree need not be walked afterwards (OpenWorkspace.adjustUsage). */
  readonly adjustUsage?: (bytes: number, files: number) => void;
}

export interface DirectoryEntry {
  readonly name: string;
  readonly type: EntryType;
  readonly size: number;
  /** Permission bits only (`& 0o777`): never setuid/setgid/sticky. */
  readonly mode: number;
  /** ISO 8601. */
  readonly mtime: string;
}

export type FileRead =
  | { readonly kind: 'directory'; readonly path: string; readonly entries: DirectoryEntry[] }
  | { readonly kind: 'file'; readonly size: number; readonly mtime: Date; open(range?: { start: number; end: number }): ReadStream; close(): Promise<void> };

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const STAGE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Bytes and entries of a tree (regular files' and links' sizes; every entry counts toward maxFiles). */
export async function treeUsage(tree: string): Promise<{ bytes: number; files: number }> {
  const entries = await scanTree(tree);
  let bytes = 0;
  for (const entry of entries) if (entry.type === 'file' || entry.type === 'symlink') bytes += entry.size;
  return { bytes, files: entries.length };
}

/** Reads a file (opened, ready to stream) or lists a directory. */
export async function readEntry(ws: FilesWorkspace, path: WorkspacePath): Promise<FileRead> {
  const host = hostPath(ws, path);
  let handle: FileHandle;
  try {
    handle = await open(host, READ_FLAGS);
  } catch (error) {
    throw translate(error, path);
  }
  let stats: Stats;
  try {
    stats = await handle.stat();
  } catch (error) {
    await handle.close();
    throw translate(error, path);
  }
  if (stats.isDirectory()) {
    await handle.close();
    return { kind: 'directory', path: path.text, entries: await listDirectory(host, path) };
  }
  if (!stats.isFile()) {
    await handle.close();
    throw errors.invalid(`path: "${path.text}" is not a regular file or directory (${entryType(stats)})`);
  }
  let streamed = false;
  return {
    kind: 'file',
    size: stats.size,
    mtime: stats.mtime,
    open: (range) => {
      streamed = true;
      // The stream reads from the checked descriptor and closes it at its end.
      return createReadStream('', { fd: handle, autoClose: true, start: range?.start ?? 0, ...(range ? { end: range.end } : {}) });
    },
    close: async () => {
      if (!streamed) await handle.close();
    },
  };
}

async function listDirectory(host: string, path: WorkspacePath): Promise<DirectoryEntry[]> {
  const entries: DirectoryEntry[] = [];
  try {
    const dir = await opendir(host);
    for await (const dirent of dir) {
      const stats = await lstat(join(host, dirent.name)).catch((error: unknown) => {
        if (isCode(error, 'ENOENT')) return undefined; // removed meanwhile
        throw error;
      });
      if (!stats) continue;
      entries.push({
        name: dirent.name,
        type: entryType(stats),
        size: stats.isFile() || stats.isSymbolicLink() ? stats.size : 0,
        mode: stats.mode & 0o777,
        mtime: stats.mtime.toISOString(),
      });
    }
  } catch (error) {
    throw translate(error, path);
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries;
}

/**
 * Writes `body` as the file at `path` (parents created): staged in `.berth/tmp`, then renamed into place.
 * Refused with 413 before anything is read when `contentLength` exceeds the free space or the new entries
 * would pass maxFiles; a full disk during the write answers 413 and leaves the tree as it was.
 */
export async function writeFile(ws: FilesWorkspace, path: WorkspacePath, body: Readable, contentLength: number | undefined): Promise<{ size: number }> {
  const target = hostPath(ws, path);
  // Parents first: a file in the way of one is a 400 naming it, not a "not found".
  const missingParents = await countMissingParents(ws, path);
  const existing = missingParents > 0 ? undefined : await lstatOrUndefined(target, path);
  if (existing && !existing.isFile()) {
    throw errors.invalid(`path: "${path.text}" is ${existing.isDirectory() ? 'a directory' : `a ${entryType(existing)}`}; delete it first`);
  }
  const added = missingParents + (existing ? 0 : 1);
  if (ws.fileCount + added > ws.maxFiles) throw errors.workspaceFull(ws.id, `${ws.maxFiles} files`);
  if (contentLength !== undefined) {
    const space = await statfs(ws.internal);
    const free = space.bavail * space.bsize;
    if (contentLength > free) throw errors.workspaceFull(ws.id, `${contentLength} bytes do not fit in the ${free} bytes left`);
  }

  const staged = join(ws.internal, 'tmp', `upload-${randomUUID()}`);
  const mode = existing && (existing.mode & 0o111) !== 0 ? 0o755 : 0o644;
  const created: string[] = [];
  try {
    const handle = await open(staged, STAGE_FLAGS, 0o600);
    let size = 0;
    try {
      for await (const chunk of body) {
        const bytes = chunk as Buffer;
        size += bytes.length;
        await handle.write(bytes);
      }
      await handle.chown(ws.fileOwner.uid, ws.fileOwner.gid);
      await handle.chmod(mode);
    } finally {
      await handle.close();
    }
    await makeParents(ws, path, created);
    await rename(staged, target);
    ws.adjustUsage?.(size - (existing?.size ?? 0), added);
    return { size };
  } catch (error) {
    await rm(staged, { force: true });
    for (const dir of created.reverse()) await rmdir(dir).catch(() => undefined);
    if (isCode(error, 'ENOSPC') || isCode(error, 'EDQUOT')) throw errors.workspaceFull(ws.id, 'no space left for this file');
    throw translate(error, path);
  }
}

/** Deletes a file, a link (the link, never what it points to) or a directory with everything in it. */
export async function deleteEntry(ws: FilesWorkspace, path: WorkspacePath): Promise<void> {
  const target = hostPath(ws, path);
  const existing = await lstatOrUndefined(target, path);
  if (!existing) throw errors.notFound(`file ${path.text}`);
  let removed = { bytes: existing.isFile() || existing.isSymbolicLink() ? existing.size : 0, files: 1 };
  try {
    if (existing.isDirectory()) removed = addUsage(removed, await treeUsage(target));
    // rm never follows links: it unlinks them (and on the view no path through one resolves at all).
    await rm(target, { recursive: existing.isDirectory(), force: false });
  } catch (error) {
    throw translate(error, path);
  }
  ws.adjustUsage?.(-removed.bytes, -removed.files);
}

function addUsage(a: { bytes: number; files: number }, b: { bytes: number; files: number }): { bytes: number; files: number } {
  return { bytes: a.bytes + b.bytes, files: a.files + b.files };
}

function hostPath(ws: FilesWorkspace, path: WorkspacePath): string {
  return path.segments.length === 0 ? ws.tree : join(ws.tree, ...path.segments);
}

async function lstatOrUndefined(host: string, path: WorkspacePath): Promise<Stats | undefined> {
  try {
    return await lstat(host);
  } catch (error) {
    if (isCode(error, 'ENOENT')) return undefined;
    throw translate(error, path);
  }
}

/** Parents of `path` that do not exist yet (each will be one more entry). */
async function countMissingParents(ws: FilesWorkspace, path: WorkspacePath): Promise<number> {
  for (let depth = path.segments.length - 1; depth > 0; depth -= 1) {
    const parent = join(ws.tree, ...path.segments.slice(0, depth));
    const stats = await lstatOrUndefined(parent, path);
    if (stats) {
      if (!stats.isDirectory()) throw errors.invalid(`path: "${path.segments.slice(0, depth).join('/')}" is not a directory`);
      return path.segments.length - 1 - depth;
    }
  }
  return path.segments.length - 1;
}

async function makeParents(ws: FilesWorkspace, path: WorkspacePath, created: string[]): Promise<void> {
  for (let depth = 1; depth < path.segments.length; depth += 1) {
    const dir = join(ws.tree, ...path.segments.slice(0, depth));
    try {
      await mkdir(dir, { mode: 0o755 });
    } catch (error) {
      if (isCode(error, 'EEXIST')) continue; // a link in its place fails at the rename (ELOOP)
      throw error;
    }
    created.push(dir);
    // Opened without following (the directory was made just now; a swap in between fails here).
    const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      await handle.chown(ws.fileOwner.uid, ws.fileOwner.gid);
      await handle.chmod(0o755);
    } finally {
      await handle.close();
    }
  }
}

/** File system errors as the API's answers, naming the path. */
function translate(error: unknown, path: WorkspacePath): unknown {
  const shown = path.text === '' ? '/' : path.text;
  if (isCode(error, 'ENOENT')) return errors.notFound(`file ${shown}`);
  if (isCode(error, 'ENOTDIR')) return errors.notFound(`file ${shown}`);
  if (isCode(error, 'ELOOP')) return errors.invalid(`path: "${shown}" is or passes through a symbolic link; links are never followed`);
  if (isCode(error, 'EISDIR')) return errors.invalid(`path: "${shown}" is a directory`);
  if (isCode(error, 'EACCES') || isCode(error, 'EPERM') || isCode(error, 'ENXIO')) return errors.invalid(`path: "${shown}" is not a regular file or directory`);
  if (isCode(error, 'ENAMETOOLONG')) return errors.invalid(`path: "${shown}" is too long`);
  return error;
}
