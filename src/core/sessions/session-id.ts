// Session ids are UUIDs, checked before any path is built from one: `../../etc` never reaches the filesystem.
import { errors } from '../../errors.js';
import { UUID_PATTERN } from '../../uuid.js';

/** The session id in canonical (lower-case) form; 400 when it is not a UUID. */
export function checkSessionUuid(sessionId: string): string {
  if (!UUID_PATTERN.test(sessionId)) throw errors.invalid(`session id "${sessionId}" is not a UUID`);
  return sessionId.toLowerCase();
}
