// GET /workspaces/:id/diff: what changed in the tree since a checkpoint (checkpoints.ts). An entry changed
// when its kind, size, mode, mtime, ctime or inode differ (any write moves ctime; a replaced file has a new
// inode), unless the checkpoint kept its content and the content and mode are the same (a `touch`).
// Files are read through the nosymfollow view with O_NOFOLLOW | O_NONBLOCK, like every API read.
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { createTwoFilesPatch, FILE_HEADERS_ONLY } from 'diff';
import { readCheckpoint, type CheckpointEntry, type CheckpointName } from './checkpoints.js';
import { isCode, scanTree, type TreeEntry } from './tree-scan.js';
import type { OpenWorkspace } from './open-workspace.js';

export interface WorkspaceDiff {
  readonly since: CheckpointName;
  readonly checkpoint_at: string;
  /** Paths of files, links and other non-directories (directories are implied by their contents). */
  readonly added: string[];
  readonly changed: string[];
  readonly removed: string[];
  /** Of the above, files whose content is not text (a NUL byte, or not UTF-8): listed, not diffed. */
  readonly binary: string[];
  /** Of the above, files larger than diffMaxFileBytes (or whose change is too large to compute): listed, not diffed. */
  readonly too_large: string[];
  /** Unified diff of the text files, git-style `a/` `b/` names. */
  readonly diff: string;
  /** Whether `diff` was cut at maxDiffBytes (the lists are complete). */
  readonly truncated: boolean;
}

export interface DiffLimits {
  readonly diffMaxFileBytes: number;
  /** Cap on the diff text of one answer. */
  readonly maxDiffBytes: number;
}

/** 8 MiB of diff text per answer: enough for a review, bounded for the service. */
export const DEFAULT_MAX_DIFF_BYTES = 8 * 1024 * 1024;
/** A change too large to compute quickly (jsdiff's Myers diff is O(N·D)) is listed as too_large. */
const MAX_EDIT_LENGTH = 20_000;
const DIFF_TIMEOUT_MS = 2_000;

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const utf8 = new TextDecoder('utf-8', { fatal: true });

type Side = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'binary' } | { readonly kind: 'too_large' } | { readonly kind: 'unknown' };

/** The diff since checkpoint `since`, or undefined when that checkpoint was never taken. */
export async function diffWorkspace(ws: Pick<OpenWorkspace, 'tree' | 'internal'>, since: CheckpointName, limits: DiffLimits): Promise<WorkspaceDiff | undefined> {
  const checkpoint = await readCheckpoint(ws, since);
  if (checkpoint === undefined) return undefined;
  try {
    const now = new Map((await scanTree(ws.tree)).map((entry) => [entry.path, entry]));
    const added: string[] = [];
    const changed: string[] = [];
    const removed: string[] = [];
    const binary: string[] = [];
    const tooLarge: string[] = [];
    const patches = new PatchText(limits.maxDiffBytes);
    const paths = [...new Set([...checkpoint.entries.keys(), ...now.keys()])].sort();
    for (const path of paths) {
      const before = checkpoint.entries.get(path);
      const after = now.get(path);
      if (before?.type === 'directory' && after?.type === 'directory') continue;
      // Content is read only for entries that are reported or whose metadata moved: a diff of a large tree
      // with a few changes reads a few files.
      const oldSide = () => (before && before.type !== 'directory' ? checkpointSide(before, limits, () => checkpoint.readContent(before)) : Promise.resolve(undefined));
      if (after === undefined || after.type === 'directory') {
        if (before === undefined || before.type === 'directory') continue;
        removed.push(path);
        classify(path, before, await oldSide(), undefined, { binary, tooLarge, patches });
        continue;
      }
      const newSide = () => (after.type === 'file' ? treeSide(ws.tree, after, limits) : Promise.resolve(undefined));
      if (before === undefined || before.type === 'directory') {
        added.push(path);
        classify(path, undefined, undefined, { entry: after, side: await newSide() }, { binary, tooLarge, patches });
        continue;
      }
      if (sameMetadata(before, after)) continue;
      const [oldContent, newContent] = [await oldSide(), await newSide()];
      if (!differs(before, after, oldContent, newContent)) continue;
      changed.push(path);
      classify(path, before, oldContent, { entry: after, side: newContent }, { binary, tooLarge, patches });
    }
    return {
      since,
      checkpoint_at: checkpoint.takenAt.toISOString(),
      added,
      changed,
      removed,
      binary,
      too_large: tooLarge,
      diff: patches.text(),
      truncated: patches.truncated,
    };
  } finally {
    await checkpoint.close();
  }
}

function sameMetadata(before: CheckpointEntry, after: TreeEntry): boolean {
  return (
    before.type === after.type &&
    before.target === after.target &&
    before.size === after.size &&
    before.mode === after.mode &&
    before.mtimeMs === after.mtimeMs &&
    before.ctimeMs === after.ctimeMs &&
    before.ino === after.ino
  );
}

/** Whether an entry whose metadata moved changed. */
function differs(before: CheckpointEntry, after: TreeEntry, oldSide: Side | undefined, newSide: Side | undefined): boolean {
  if (before.type !== after.type) return true;
  if (before.type === 'symlink') return before.target !== after.target;
  if (before.type !== 'file' || before.mode !== after.mode || before.size !== after.size) return true;
  // Only the times or the inode moved: the same content is no change.
  if (oldSide?.kind === 'text' && newSide?.kind === 'text') return oldSide.text !== newSide.text;
  return true;
}

interface Sinks {
  readonly binary: string[];
  readonly tooLarge: string[];
  readonly patches: PatchText;
}

function classify(path: string, before: CheckpointEntry | undefined, oldSide: Side | undefined, after: { entry: TreeEntry; side: Side | undefined } | undefined, sinks: Sinks): void {
  const oldFile = before?.type === 'file';
  const newFile = after?.entry.type === 'file';
  if (!oldFile && !newFile) return; // links and special files: listed only
  const sides = [oldFile ? oldSide : undefined, newFile ? after?.side : undefined];
  if (sides.some((side) => side?.kind === 'too_large')) {
    sinks.tooLarge.push(path);
    return;
  }
  if (sides.some((side) => side?.kind === 'binary')) {
    sinks.binary.push(path);
    return;
  }
  if (sides.some((side) => side?.kind === 'unknown')) return; // content not kept (no room at checkpoint time) or unreadable
  const oldText = oldFile && oldSide?.kind === 'text' ? oldSide.text : undefined;
  const newText = newFile && after?.side?.kind === 'text' ? after.side.text : undefined;
  const patch = createTwoFilesPatch(
    oldText === undefined ? '/dev/null' : `a/${path}`,
    newText === undefined ? '/dev/null' : `b/${path}`,
    oldText ?? '',
    newText ?? '',
    undefined,
    undefined,
    { headerOptions: FILE_HEADERS_ONLY, maxEditLength: MAX_EDIT_LENGTH, timeout: DIFF_TIMEOUT_MS },
  );
  if (patch === undefined) {
    sinks.tooLarge.push(path);
    return;
  }
  const mode = (entry: TreeEntry) => ((entry.mode & 0o111) !== 0 ? '100755' : '100644');
  const header =
    `diff --git a/${path} b/${path}\n` +
    (oldText === undefined && after ? `new file mode ${mode(after.entry)}\n` : '') +
    (newText === undefined && before ? `deleted file mode ${mode(before)}\n` : '');
  sinks.patches.add(header + patch);
}

async function checkpointSide(entry: CheckpointEntry, limits: DiffLimits, read: () => Promise<Buffer | undefined>): Promise<Side | undefined> {
  if (entry.type !== 'file') return undefined;
  if (entry.size > limits.diffMaxFileBytes) return { kind: 'too_large' };
  const content = await read();
  return content === undefined ? { kind: 'unknown' } : sideOf(content);
}

async function treeSide(tree: string, entry: TreeEntry, limits: DiffLimits): Promise<Side> {
  if (entry.size > limits.diffMaxFileBytes) return { kind: 'too_large' };
  let handle;
  try {
    handle = await open(join(tree, entry.path), READ_FLAGS);
  } catch (error) {
    if (isCode(error, 'ENOENT') || isCode(error, 'ELOOP') || isCode(error, 'ENXIO')) return { kind: 'unknown' };
    throw error;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return { kind: 'unknown' };
    if (stats.size > limits.diffMaxFileBytes) return { kind: 'too_large' };
    const content = Buffer.alloc(stats.size);
    const { bytesRead } = await handle.read(content, 0, content.length, 0);
    return sideOf(content.subarray(0, bytesRead));
  } finally {
    await handle.close();
  }
}

/** Text when it has no NUL byte and is valid UTF-8 (what git and diff tools treat as text, near enough). */
export function sideOf(content: Buffer): Side {
  if (content.includes(0)) return { kind: 'binary' };
  try {
    return { kind: 'text', text: utf8.decode(content) };
  } catch {
    return { kind: 'binary' };
  }
}

/** The diff text, cut at a byte budget between whole file patches. */
class PatchText {
  private readonly parts: string[] = [];
  private bytes = 0;
  truncated = false;

  constructor(private readonly maxBytes: number) {}

  add(patch: string): void {
    if (this.truncated) return;
    const size = Buffer.byteLength(patch) + 1;
    if (this.bytes + size > this.maxBytes) {
      this.truncated = true;
      return;
    }
    this.parts.push(patch.endsWith('\n') ? patch : `${patch}\n`);
    this.bytes += size;
  }

  text(): string {
    return this.parts.join('');
  }
}
