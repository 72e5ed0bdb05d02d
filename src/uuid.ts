// One spelling of a UUID for every id Berth takes or makes (session ids, workspace ids, the engine's
// session_id): canonical 8-4-4-4-12 hexadecimal, any version. An id is checked against it before any path
// is built from it, so `../../etc` never reaches the filesystem.

const UUID_SOURCE = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** A UUID in either case, as a caller may write one; Berth makes and stores them lowercase. */
export const UUID_PATTERN = new RegExp(`^${UUID_SOURCE}$`, 'i');

/** A file name Berth wrote from an id, `<uuid><suffix>`, capturing the id. */
export function uuidNamed(suffix: string): RegExp {
  return new RegExp(`^(${UUID_SOURCE})${suffix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'i');
}
