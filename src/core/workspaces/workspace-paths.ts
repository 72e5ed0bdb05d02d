// The paths a caller names inside a workspace: checked once at the edge into a list of plain segments, so
// nothing past this point can leave the tree by the path's text. (Links cannot take it out either: every
// file operation goes through the workspace's nosymfollow view, runtime/workspace-disks.ts.)
import { errors } from '../../errors.js';

/** Longest path accepted (PATH_MAX) and longest name of one segment (NAME_MAX), in bytes. */
export const MAX_PATH_BYTES = 4096;
export const MAX_SEGMENT_BYTES = 255;

/** A checked relative path: its segments (none empty, `.` or `..`; no `/` or NUL). The root has none. */
export interface WorkspacePath {
  readonly segments: readonly string[];
  /** `a/b/c`; '' for the root. */
  readonly text: string;
}

export const ROOT_PATH: WorkspacePath = Object.freeze({ segments: Object.freeze([]), text: '' });

/**
 * Checks a caller's path (already URL-decoded); throws a 400 naming `field` when it is not a plain relative
 * path. Names are compared as bytes: no Unicode normalisation (a file named in NFD stays that file).
 * `allowRoot`: '' (or only a trailing `/`) names the tree's root.
 */
export function parseWorkspacePath(raw: string, options: { field?: string; allowRoot?: boolean } = {}): WorkspacePath {
  const field = options.field ?? 'path';
  const refuse = (why: string) => errors.invalid(`${field}: ${why}`);
  if (raw.includes('\0')) throw refuse('contains a NUL character');
  if (Buffer.byteLength(raw) > MAX_PATH_BYTES) throw refuse(`longer than ${MAX_PATH_BYTES} bytes`);
  if (raw.startsWith('/')) throw refuse(`"${raw}" is absolute; paths are relative to the workspace root`);
  // A trailing slash is allowed (a directory named as such); any other empty segment is not.
  const text = raw.endsWith('/') ? raw.slice(0, -1) : raw;
  if (text === '') {
    if (options.allowRoot === true) return ROOT_PATH;
    throw refuse('names the workspace root; name a file');
  }
  const segments = text.split('/');
  for (const segment of segments) {
    if (segment === '') throw refuse(`"${raw}" has an empty segment`);
    if (segment === '.' || segment === '..') throw refuse(`"${raw}" has a "${segment}" segment`);
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) throw refuse(`a segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
  }
  return { segments, text };
}
