import { constants } from 'node:fs';
import { link, mkdir, open, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { isCode, scanTree, type TreeEntry } from './tree-scan.js';

/** The parts of a mounted workspace (workspace-service.ts's OpenWorkspace) a checkpoint reads: paths on its nosymfollow view. */
interface OpenWorkspace {
  readonly tree: string;
  readonly internal: string;
}

/** `last_run`: the tree as it was when the last run or agent began; `upload`: after the last archive upload or clone. */
export type CheckpointName = 'last_run' | 'upload';
export const CHECKPOINT_NAMES: readonly CheckpointName[] = ['last_run', 'upload'];

/** A manifest entry; `copy` names the kept copy of a regular file's content (absent when too large or no room). */
export interface CheckpointEntry extends TreeEntry {
  readonly copy?: string;
}

export interface CheckpointManifest {
  readonly version: 1;
  readonly name: CheckpointName;
  readonly taken_at: string;
  readonly entries: CheckpointEntry[];
}

export interface Checkpoint {
  readonly name: CheckpointName;
  readonly takenAt: Date;
  readonly entries: ReadonlyMap<string, CheckpointEntry>;
  /** Host path (on the view) of an entry's kept copy. */
  copyPath(copy: string): string;
}

export interface CheckpointSummary {
  readonly takenAt: Date;
  readonly entries: number;
  /** Regular files whose content was kept (copied or linked from the previous checkpoint). */
  readonly copies: number;
  /** Regular files <= diffMaxFileBytes whose content could not be kept: the file system had no room. */
  readonly skippedForSpace: number;
}

const O_READ_NOFOLLOW = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const COPY_CONCURRENCY = 8;

function checkpointsDir(ws: OpenWorkspace): string {
  return join(ws.internal, 'checkpoints');
}

/**
 * Replaces checkpoint `name` with the tree's state now: a manifest of every entry (path, type, size, mode,
 * mtime, ctime, ino, a symlink's target as text) plus copies of regular files <= diffMaxFileBytes.
 *
 * Everything goes through the workspace's nosymfollow view and lstat/O_NOFOLLOW: a link is recorded, never
 * followed; O_NONBLOCK means a FIFO swapped in for a file cannot block the walk (it fails the fstat check).
 * The new checkpoint is built beside the old one and swapped in with renames, so a reader sees the old or the
 * new one, never half of one. A file unchanged since the previous checkpoint of the same name (same inode,
 * size, mtime and ctime: any write moves ctime) is hard-linked from it instead of copied: a checkpoint at the
 * start of every run then costs a walk plus the changed files. When the file system has no room for a copy
 * (a nearly full workspace), the remaining files are recorded without content and a diff compares them by
 * their metadata only.
 */
export async function takeCheckpoint(
  ws: OpenWorkspace,
  name: CheckpointName,
  options: { diffMaxFileBytes: number },
): Promise<CheckpointSummary> {
  const dir = checkpointsDir(ws);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await removeLeftovers(dir);
  const previous = await readCheckpoint(ws, name).catch(() => undefined);
  const build = join(dir, `.build-${name}-${randomUUID()}`);
  const files = join(build, 'files');
  await mkdir(files, { recursive: true, mode: 0o700 });
  try {
    const scanned = await scanTree(ws.tree);
    const entries: CheckpointEntry[] = new Array(scanned.length);
    let copies = 0;
    let skippedForSpace = 0;
    let noRoom = false;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < scanned.length) {
        const index = next++;
        const entry = scanned[index] as TreeEntry;
        if (entry.type !== 'file' || entry.size > options.diffMaxFileBytes) {
          entries[index] = entry;
          continue;
        }
        if (noRoom) {
          entries[index] = entry;
          skippedForSpace += 1;
          continue;
        }
        const copy = String(index);
        try {
          const kept = await keepContent(ws.tree, entry, join(files, copy), previous, options.diffMaxFileBytes);
          entries[index] = kept ? { ...kept, copy } : entry;
          if (kept) copies += 1;
        } catch (error) {
          if (!isCode(error, 'ENOSPC') && !isCode(error, 'EDQUOT')) throw error;
          noRoom = true;
          skippedForSpace += 1;
          entries[index] = entry;
          await rm(join(files, copy), { force: true });
        }
      }
    };
    await Promise.all(Array.from({ length: COPY_CONCURRENCY }, worker));
    const takenAt = new Date();
    const manifest: CheckpointManifest = { version: 1, name, taken_at: takenAt.toISOString(), entries };
    await writeFile(join(build, 'manifest.json'), JSON.stringify(manifest), { mode: 0o600 });
    await swapIn(dir, name, build);
    return { takenAt, entries: entries.length, copies, skippedForSpace };
  } catch (error) {
    await rm(build, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Keeps the content of one regular file at `destination`; answers the entry as seen by the fstat of the
 * opened file (what the copy matches), or undefined when the entry is no longer a regular file of at most
 * `maxBytes` (it changed during the walk).
 */
async function keepContent(
  tree: string,
  entry: TreeEntry,
  destination: string,
  previous: Checkpoint | undefined,
  maxBytes: number,
): Promise<TreeEntry | undefined> {
  const before = previous?.entries.get(entry.path);
  if (
    before?.copy !== undefined &&
    before.type === 'file' &&
    before.ino === entry.ino &&
    before.size === entry.size &&
    before.mtimeMs === entry.mtimeMs &&
    before.ctimeMs === entry.ctimeMs
  ) {
    try {
      await link(previous!.copyPath(before.copy), destination);
      return entry;
    } catch (error) {
      if (!isCode(error, 'ENOENT') && !isCode(error, 'EMLINK')) throw error;
    }
  }
  let handle;
  try {
    handle = await open(join(tree, entry.path), O_READ_NOFOLLOW);
  } catch (error) {
    // Gone, or swapped for a link (ELOOP on the view) since the walk: recorded without content.
    if (isCode(error, 'ENOENT') || isCode(error, 'ELOOP') || isCode(error, 'ENXIO')) return undefined;
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.size > maxBytes) return undefined;
    const content = await handle.readFile();
    if (content.length > maxBytes) return undefined;
    await writeFile(destination, content, { mode: 0o600, flag: 'wx' });
    return { ...entry, size: stats.size, mode: stats.mode & 0o7777, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino };
  } finally {
    await handle.close();
  }
}

/** `build` becomes `<dir>/<name>`; the old one is moved aside first (a directory cannot be renamed over a non-empty one) and removed. */
async function swapIn(dir: string, name: CheckpointName, build: string): Promise<void> {
  const current = join(dir, name);
  const old = join(dir, `.old-${name}-${randomUUID()}`);
  let moved = false;
  try {
    await rename(current, old);
    moved = true;
  } catch (error) {
    if (!isCode(error, 'ENOENT')) throw error;
  }
  await rename(build, current);
  if (moved) await rm(old, { recursive: true, force: true });
}

/** Builds and old copies a crash left behind (a checkpoint is taken again, so they are never needed). */
async function removeLeftovers(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (name.startsWith('.build-') || name.startsWith('.old-')) await rm(join(dir, name), { recursive: true, force: true });
  }
}

/** Checkpoint `name` as last taken, or undefined when none was taken yet. */
export async function readCheckpoint(ws: OpenWorkspace, name: CheckpointName): Promise<Checkpoint | undefined> {
  const root = join(checkpointsDir(ws), name);
  let text: string;
  try {
    text = await readFile(join(root, 'manifest.json'), 'utf8');
  } catch (error) {
    if (isCode(error, 'ENOENT')) return undefined;
    throw error;
  }
  const manifest = JSON.parse(text) as CheckpointManifest;
  const entries = new Map<string, CheckpointEntry>();
  for (const entry of manifest.entries) entries.set(entry.path, entry);
  return {
    name,
    takenAt: new Date(manifest.taken_at),
    entries,
    copyPath: (copy: string) => join(root, 'files', copy),
  };
}
