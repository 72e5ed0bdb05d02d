import { constants } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, truncate, writeFile, type FileHandle } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { isCode, scanTree, type TreeEntry } from './tree-scan.js';
import type { OpenWorkspace } from './open-workspace.js';

/** `last_run`: the tree as it was when the last run or agent began; `upload`: after the last archive upload or clone. */
export type CheckpointName = 'last_run' | 'upload';
export const CHECKPOINT_NAMES: readonly CheckpointName[] = ['last_run', 'upload'];

/** A manifest entry; `content` locates the kept content of a regular file in the checkpoint's content file (absent when too large or no room). */
export interface CheckpointEntry extends TreeEntry {
  readonly content?: { readonly offset: number; readonly length: number };
}

export interface CheckpointManifest {
  readonly version: 1;
  readonly name: CheckpointName;
  readonly taken_at: string;
  /** Name of the content file beside the manifest: unique per build, so a reader never pairs a manifest with another build's content. */
  readonly content_file: string;
  readonly entries: CheckpointEntry[];
}

export interface Checkpoint {
  readonly name: CheckpointName;
  readonly takenAt: Date;
  readonly entries: ReadonlyMap<string, CheckpointEntry>;
  /** The kept content of an entry, or undefined when the checkpoint kept none for it. */
  readContent(entry: CheckpointEntry): Promise<Buffer | undefined>;
  /** Closes the content file (held open so a checkpoint taken meanwhile does not change what this one reads). */
  close(): Promise<void>;
}

export interface CheckpointSummary {
  readonly takenAt: Date;
  readonly entries: number;
  /** Regular files whose content was kept. */
  readonly kept: number;
  /** Regular files <= diffMaxFileBytes whose content could not be kept: the file system had no room. */
  readonly skippedForSpace: number;
}

const O_READ_NOFOLLOW = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const READ_CONCURRENCY = 8;

function checkpointsDir(ws: Pick<OpenWorkspace, 'internal'>): string {
  return join(ws.internal, 'checkpoints');
}

/**
 * Replaces checkpoint `name` with the tree's state now: a manifest of every entry (path, type, size, mode,
 * mtime, ctime, ino, a symlink's target as text) plus the content of regular files <= diffMaxFileBytes.
 *
 * Everything goes through the workspace's nosymfollow view and lstat/O_NOFOLLOW: a link is recorded, never
 * followed; O_NONBLOCK means a FIFO swapped in for a file cannot block the walk (it fails the fstat check).
 * The contents go into ONE file at offsets the manifest records: creating a file costs ~0.4 ms on these disks,
 * so a copy per file made a checkpoint of 1,000 small files take ~900 ms, one content file ~150 ms (it runs at
 * the start of every run with a workspace), and it uses two inodes however many files the tree holds.
 * The new checkpoint is built beside the old one and swapped in with renames, so a reader sees the old or the
 * new one, never half of one. When the file system has no room for the content (a nearly full workspace),
 * the remaining files are recorded without it and a diff compares them by their metadata only.
 */
export async function takeCheckpoint(
  ws: Pick<OpenWorkspace, 'tree' | 'internal'>,
  name: CheckpointName,
  options: { diffMaxFileBytes: number },
): Promise<CheckpointSummary> {
  const dir = checkpointsDir(ws);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await removeLeftovers(dir);
  const buildId = randomUUID();
  const build = join(dir, `.build-${name}-${buildId}`);
  const contentName = `content-${buildId}`;
  await mkdir(build, { mode: 0o700 });
  // Content of files unchanged since an earlier checkpoint is copied from its content file (one open file)
  // instead of opening each file of the tree again: 1,000 small files, ~40 % less time.
  const earlier = (await Promise.all(CHECKPOINT_NAMES.map((other) => readCheckpoint(ws, other).catch(() => undefined)))).filter(
    (checkpoint): checkpoint is Checkpoint => checkpoint !== undefined,
  );
  try {
    const scanned = await scanTree(ws.tree);
    const entries: CheckpointEntry[] = scanned.slice();
    const contentFile = await open(join(build, contentName), 'wx', 0o600);
    let kept = 0;
    let skippedForSpace = 0;
    try {
      let noRoom = false;
      let end = 0;
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < scanned.length) {
          const index = next++;
          const entry = scanned[index] as TreeEntry;
          if (entry.type !== 'file' || entry.size > options.diffMaxFileBytes) continue;
          if (noRoom) {
            skippedForSpace += 1;
            continue;
          }
          const read = (await reuseContent(earlier, entry)) ?? (await readSmallFile(ws.tree, entry, options.diffMaxFileBytes));
          if (read === undefined) continue;
          const offset = end;
          end += read.content.length;
          try {
            await writeAll(contentFile, read.content, offset);
          } catch (error) {
            if (!isCode(error, 'ENOSPC') && !isCode(error, 'EDQUOT')) throw error;
            noRoom = true;
            skippedForSpace += 1;
            continue;
          }
          entries[index] = { ...read.entry, content: { offset, length: read.content.length } };
          kept += 1;
        }
      };
      await Promise.all(Array.from({ length: READ_CONCURRENCY }, worker));
    } finally {
      await contentFile.close();
    }
    const takenAt = new Date();
    const manifest: CheckpointManifest = { version: 1, name, taken_at: takenAt.toISOString(), content_file: contentName, entries };
    try {
      await writeFile(join(build, 'manifest.json'), JSON.stringify(manifest), { mode: 0o600 });
    } catch (error) {
      if (!isCode(error, 'ENOSPC') && !isCode(error, 'EDQUOT')) throw error;
      // No room for the manifest next to the content: a manifest without content (a diff by metadata) beats none.
      await truncate(join(build, contentName), 0);
      const bare = entries.map(({ content: _dropped, ...entry }) => entry);
      await writeFile(join(build, 'manifest.json'), JSON.stringify({ ...manifest, entries: bare }), { mode: 0o600 });
      skippedForSpace += kept;
      kept = 0;
    }
    await swapIn(dir, name, build);
    return { takenAt, entries: entries.length, kept, skippedForSpace };
  } catch (error) {
    await rm(build, { recursive: true, force: true });
    throw error;
  } finally {
    await Promise.all(earlier.map((checkpoint) => checkpoint.close()));
  }
}

/**
 * The content an earlier checkpoint kept for this very file: same inode, size, mtime and ctime (any write to
 * the file moves its ctime, and ctime cannot be set back), so the bytes are the same.
 */
async function reuseContent(earlier: readonly Checkpoint[], entry: TreeEntry): Promise<{ entry: TreeEntry; content: Buffer } | undefined> {
  for (const checkpoint of earlier) {
    const before = checkpoint.entries.get(entry.path);
    if (
      before?.content === undefined ||
      before.type !== 'file' ||
      before.ino !== entry.ino ||
      before.size !== entry.size ||
      before.mtimeMs !== entry.mtimeMs ||
      before.ctimeMs !== entry.ctimeMs ||
      before.mode !== entry.mode
    ) {
      continue;
    }
    const content = await checkpoint.readContent(before);
    if (content !== undefined && content.length === entry.size) return { entry, content };
  }
  return undefined;
}

async function writeAll(handle: FileHandle, content: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < content.length) {
    const { bytesWritten } = await handle.write(content, done, content.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * The content of one regular file with the entry as the fstat of the opened file saw it (what the content
 * matches), or undefined when it is no longer a regular file of at most `maxBytes` (it changed during the walk).
 */
async function readSmallFile(
  tree: string,
  entry: TreeEntry,
  maxBytes: number,
): Promise<{ entry: TreeEntry; content: Buffer } | undefined> {
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
    return {
      entry: { ...entry, size: content.length, mode: stats.mode & 0o7777, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs, ino: stats.ino },
      content,
    };
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

/** Checkpoint `name` as last taken, or undefined when none was taken yet. The caller closes it. */
export async function readCheckpoint(ws: Pick<OpenWorkspace, 'tree' | 'internal'>, name: CheckpointName): Promise<Checkpoint | undefined> {
  const root = join(checkpointsDir(ws), name);
  // A checkpoint swapped in between reading the manifest and opening its content: read the new one.
  for (let attempt = 0; ; attempt++) {
    let manifest: CheckpointManifest;
    try {
      manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as CheckpointManifest;
    } catch (error) {
      if (isCode(error, 'ENOENT')) return undefined;
      throw error;
    }
    let content: FileHandle;
    try {
      content = await open(join(root, manifest.content_file), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      if (isCode(error, 'ENOENT') && attempt < 5) continue;
      throw error;
    }
    const entries = new Map<string, CheckpointEntry>();
    for (const entry of manifest.entries) entries.set(entry.path, entry);
    return {
      name,
      takenAt: new Date(manifest.taken_at),
      entries,
      readContent: async (entry) => {
        if (entry.content === undefined) return undefined;
        const buffer = Buffer.alloc(entry.content.length);
        const { bytesRead } = await content.read(buffer, 0, buffer.length, entry.content.offset);
        return buffer.subarray(0, bytesRead);
      },
      close: () => content.close(),
    };
  }
}
