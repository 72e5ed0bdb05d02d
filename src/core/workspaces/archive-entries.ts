// The checks every entry of an uploaded archive passes before anything of the archive is written: pure
// functions of the entry's header and of where the archive lands, so each refusal is a unit test.
import { posix } from 'node:path';
import { errors, type BerthError } from '../../errors.js';
import { MAX_PATH_BYTES, MAX_SEGMENT_BYTES } from './workspace-paths.js';

/** What an archive may hold; everything else (hard links, devices, FIFOs, unknown kinds) is refused. */
export type ArchiveEntryType = 'file' | 'directory' | 'symlink';

export interface ArchiveEntry {
  /** Path below the tree's root (the `?path=` prefix included), `/`-separated; never empty. */
  readonly segments: readonly string[];
  readonly path: string;
  readonly type: ArchiveEntryType;
  readonly size: number;
  /** Normalised as Berth writes files: 0755 for directories and files with any x bit, else 0644. */
  readonly mode: 0o644 | 0o755;
  readonly mtime: Date | undefined;
  /** A symlink's target, as written in the archive (checked to stay inside the workspace). */
  readonly target?: string;
}

/** Where an entry lands: below `prefix` (the `?path=` subdirectory's segments) of the tree. */
export interface EntryContext {
  readonly prefix: readonly string[];
}

/** An entry header as tar-stream reads it (pax and GNU long names applied); `type` is null for kinds it does not know. */
export interface EntryHeader {
  readonly name: string;
  readonly type?: string | null;
  readonly mode?: number;
  readonly size?: number;
  readonly mtime?: Date;
  readonly linkname?: string | null;
}

/** Headers tar-stream consumes itself (pax and GNU long names are applied to the entry that follows). */
const META_TYPES = new Set(['pax-header', 'pax-global-header', 'gnu-long-path', 'gnu-long-link-path']);

export function refuseEntry(name: string, why: string): BerthError {
  return errors.invalid(`archive entry "${name}": ${why}; nothing of this archive was written`);
}

/**
 * The checked entry, `undefined` for an entry that names the destination itself (`./`, which a
 * `tar -C dir .` writes first) or a meta header, or a 400 naming the entry.
 */
export function checkEntry(header: EntryHeader, context: EntryContext): ArchiveEntry | undefined {
  const name = header.name;
  const type = header.type === undefined ? 'file' : header.type;
  if (type !== null && META_TYPES.has(type)) return undefined;
  const kind = type === null ? undefined : entryKind(type);
  if (kind === undefined) throw refuseEntry(name, refusedTypeReason(type ?? 'unknown'));
  const relative = entrySegments(name);
  if (relative.length === 0) {
    if (kind !== 'directory') throw refuseEntry(name, 'has no name');
    return undefined;
  }
  const mode = header.mode ?? 0o644;
  if ((mode & 0o4000) !== 0) throw refuseEntry(name, 'has the setuid bit');
  if ((mode & 0o2000) !== 0) throw refuseEntry(name, 'has the setgid bit');
  const segments = [...context.prefix, ...relative];
  const path = segments.join('/');
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw refuseEntry(name, `its path is longer than ${MAX_PATH_BYTES} bytes`);
  const base: Omit<ArchiveEntry, 'type' | 'mode' | 'size'> = { segments, path, mtime: header.mtime };
  if (kind === 'directory') return { ...base, type: 'directory', size: 0, mode: 0o755 };
  if (kind === 'symlink') {
    const target = header.linkname ?? '';
    checkLinkTarget(name, segments, target);
    return { ...base, type: 'symlink', size: 0, mode: 0o755, target };
  }
  return { ...base, type: 'file', size: header.size ?? 0, mode: (mode & 0o111) !== 0 ? 0o755 : 0o644 };
}

function entryKind(type: string): ArchiveEntryType | undefined {
  if (type === 'file' || type === 'contiguous-file') return 'file';
  if (type === 'directory') return 'directory';
  if (type === 'symlink') return 'symlink';
  return undefined;
}

function refusedTypeReason(type: string): string {
  switch (type) {
    case 'link':
      return 'is a hard link; hard links are refused';
    case 'character-device':
      return 'is a character device; devices are refused';
    case 'block-device':
      return 'is a block device; devices are refused';
    case 'fifo':
      return 'is a FIFO; special files are refused';
    default:
      return 'is of a kind that is neither a file, a directory nor a symbolic link';
  }
}

/**
 * The entry's name as segments: `.` and empty segments dropped (`./src//a` is `src/a`), trailing `/` allowed.
 * Absolute names, `..` segments, NUL and over-long segments are refused (a name is never "fixed" by stripping
 * a leading `/` the way tar does: the caller learns which entry is wrong).
 */
export function entrySegments(name: string): string[] {
  if (name.includes('\0')) throw refuseEntry(name, 'contains a NUL character');
  if (name.startsWith('/')) throw refuseEntry(name, 'is an absolute path; entries must be relative');
  const segments: string[] = [];
  for (const segment of name.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') throw refuseEntry(name, 'has a ".." segment');
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) throw refuseEntry(name, `has a segment longer than ${MAX_SEGMENT_BYTES} bytes`);
    segments.push(segment);
  }
  return segments;
}

/**
 * A symlink must resolve inside the workspace, judged by its text alone (resolved relative to the link's own
 * directory): relative, and `..` only as leading segments, no more of them than the link's directory is
 * deep. `..` after a name is refused because that name may itself be a link (`d/b -> ..` then
 * `x -> d/b/..`): judged by text `x` would stay inside, resolved it is the workspace's parent.
 */
export function checkLinkTarget(name: string, segments: readonly string[], target: string): void {
  if (target === '') throw refuseEntry(name, 'is a symbolic link without a target');
  if (target.includes('\0')) throw refuseEntry(name, 'is a symbolic link whose target contains a NUL character');
  if (posix.isAbsolute(target)) throw refuseEntry(name, `is a symbolic link to the absolute path "${target}"; links must stay inside the workspace`);
  const parts = target.split('/').filter((part) => part !== '' && part !== '.');
  let ups = 0;
  for (const [index, part] of parts.entries()) {
    if (part !== '..') continue;
    if (index !== ups) throw refuseEntry(name, `is a symbolic link to "${target}", which has ".." after a name; links must stay inside the workspace`);
    ups += 1;
  }
  const depth = segments.length - 1; // the link's directory
  if (ups > depth) throw refuseEntry(name, `is a symbolic link to "${target}", which points outside the workspace`);
}

/**
 * Checks an archive's entries together: a path may not be a directory in one entry and something else in
 * another, and no entry may lie below one that is not a directory (a link `a` then a file `a/b` would write
 * through the link).
 */
export function checkTogether(entries: readonly ArchiveEntry[]): void {
  const kinds = new Map<string, { type: ArchiveEntryType; name: string }>();
  for (const entry of entries) {
    const seen = kinds.get(entry.path);
    if (seen && (seen.type === 'directory') !== (entry.type === 'directory')) {
      throw refuseEntry(entry.path, `is both a ${seen.type} and a ${entry.type} in this archive`);
    }
    kinds.set(entry.path, { type: entry.type, name: entry.path });
  }
  for (const entry of entries) {
    for (let depth = 1; depth < entry.segments.length; depth += 1) {
      const parent = kinds.get(entry.segments.slice(0, depth).join('/'));
      if (parent && parent.type !== 'directory') {
        throw refuseEntry(entry.path, `lies below "${parent.name}", which is a ${parent.type} in this archive`);
      }
    }
  }
}
