// The replayable event log: every agent and job event, under an id that only grows, kept per stream (one
// agent, one job) within a count and an age, so a client that reconnects with Last-Event-ID, after a
// dropped connection or a restart of the service, is sent what it missed (docs/streaming.md).
//
// This is the contract every backend implements (SQLite today, PostgreSQL for several nodes); the suite in
// test/support/event-log-contract.ts is run against each. Methods answer promises so that a networked
// backend fits the same interface; the SQLite one completes its work before it answers.

/** One stored event: `data` is the frame's JSON object as the stream sends it. */
export interface StoredEvent {
  /** Assigned by the log at append: greater than every id appended before it, in any stream; never reused. */
  readonly id: number;
  readonly stream: string;
  /** The SSE `event:` name. */
  readonly type: string;
  readonly data: Readonly<Record<string, unknown>>;
  /** Milliseconds since the epoch, when it was appended (what age retention compares). */
  readonly atMs: number;
}

/** What a read after an id finds. */
export interface EventsAfter {
  /** Kept events of the stream with an id above the one asked for, oldest first, at most the limit asked. */
  readonly events: readonly StoredEvent[];
  /**
   * Events of the stream after the id asked for that are no longer kept (pruned by count or age): the
   * highest such id. Undefined when nothing after the id asked for was pruned.
   */
  readonly lostThrough: number | undefined;
}

export interface EventRetention {
  /** Events kept per stream; older ones are pruned. */
  readonly maxPerStream: number;
  /**
   * Bytes of event data (as JSON) kept per stream: an agent's output line may be megabytes, so a count alone
   * does not bound the disk. The newest event is kept whatever its size.
   */
  readonly maxBytesPerStream: number;
  /** Events older than this are pruned (by prune(), which the service calls periodically). */
  readonly maxAgeMs: number;
}

export interface EventLog {
  /**
   * Appends one event and answers it with its id. Appends to one stream must be awaited in order by their
   * writer (the log does not order concurrent appends of one stream); the event is readable by after() once
   * the promise resolves.
   */
  append(stream: string, type: string, data: Readonly<Record<string, unknown>>, atMs: number): Promise<StoredEvent>;
  /** The stream's kept events with an id above `afterId` (0: from the first kept), oldest first. */
  after(stream: string, afterId: number, limit?: number): Promise<EventsAfter>;
  /** Prunes every stream to the retention: events beyond the count and older than `nowMs - maxAgeMs`. */
  prune(nowMs: number): Promise<number>;
  /** Forgets a stream whose subject is gone (a deleted agent or job): its events and its pruning record. */
  removeStream(stream: string): Promise<void>;
  close(): Promise<void>;
}

/** Stream names: one namespace per kind of subject, so an agent and a job can never share a stream. */
export const eventStreams = {
  agent: (id: string) => `agent:${id}`,
  job: (id: string) => `job:${id}`,
} as const;
