// Announcements of events appended to a shared event log by any node (issue 26): a node's follower of a stream
// another node writes (a job accepted here and claimed there) learns that the log holds something new and
// reads it from the log. A notice carries no event data; notices may be lost (a dropped connection), so the
// reader also reads on `listening` and on a slow poll of its own.

export type EventNotice =
  /** An event of `stream` with this id was committed to the log. */
  | { readonly kind: 'appended'; readonly stream: string; readonly id: number }
  /** Notices flow (again): whatever was appended while none did is to be read from the log. */
  | { readonly kind: 'listening' };

export interface EventNotices {
  /** Starts delivering notices to `on`; once. */
  start(on: (notice: EventNotice) => void): void;
  /** Stops; resolves once no more notice is delivered. */
  stop(): Promise<void>;
}

/** A notice's payload, '<stream>:<id>' (a stream name holds colons itself: the id follows the last one). */
export function parseEventNotice(payload: string | undefined): EventNotice | undefined {
  if (payload === undefined) return undefined;
  const colon = payload.lastIndexOf(':');
  const id = Number(payload.slice(colon + 1));
  if (colon <= 0 || !Number.isSafeInteger(id) || id <= 0) return undefined;
  return { kind: 'appended', stream: payload.slice(0, colon), id };
}
