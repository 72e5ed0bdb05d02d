// The workdir rule. The engine is started in the workdir and hook commands `cd` into it, so besides the
// container-path blocklist (shared with volumes.ts) it is limited to characters no shell treats specially.
import { errors } from '../../errors.js';
import { blockedPathReason, NAME_MAX_BYTES, PATH_MAX_BYTES } from './volumes.js';
import { checkCharacters } from './text.js';

/**
 * Shell-safe workdir characters: ASCII letters, digits, `/`, `.`, `_`, `-`, `+` and `@`. Excluded on
 * purpose: `,` and `=` (separators in Podman's --mount syntax), `~` (tilde expansion), `:` (volume
 * syntax), spaces, quotes, `$`, `*`, `?`, brackets, and everything non-ASCII.
 */
const WORKDIR = /^[A-Za-z0-9._+@/-]+$/;

/**
 * Checks a workdir and returns it without a trailing slash. Refused: relative paths, characters outside
 * the set above, `.` and `..` segments, `//`, over 4096 bytes, a name over 255 bytes, `/` itself, and
 * anything at or under a blocked container path.
 */
export function validateWorkdir(workdir: string, field = 'workdir'): string {
  checkCharacters(workdir, field, false);
  if (!workdir.startsWith('/')) throw errors.invalid(`${field}: "${workdir}" must be an absolute path (starting with /)`);
  if (workdir.length > PATH_MAX_BYTES) throw errors.invalid(`${field}: is longer than ${PATH_MAX_BYTES} bytes`);
  const bad = [...workdir].find((char) => !WORKDIR.test(char));
  if (bad !== undefined) {
    throw errors.invalid(`${field}: "${workdir}" contains "${bad}"; only letters, digits and / . _ - + @ are allowed`);
  }
  if (workdir.includes('//')) throw errors.invalid(`${field}: "${workdir}" must not contain "//"`);
  const normalised = workdir.length > 1 ? workdir.replace(/\/$/, '') : workdir;
  const segments = normalised.split('/').slice(1);
  for (const segment of segments) {
    if (segment === '.' || segment === '..') throw errors.invalid(`${field}: "${workdir}" must not contain "${segment}" segments`);
    if (segment.length > NAME_MAX_BYTES) throw errors.invalid(`${field}: has a name longer than ${NAME_MAX_BYTES} bytes`);
  }
  const reason = blockedPathReason(normalised);
  if (reason !== undefined) throw errors.invalid(`${field}: "${normalised}" cannot be the working directory: ${reason}`);
  return normalised;
}
