// An event log Berth keeps (an agent's events, a job's statuses) followed over its SSE stream as an async
// iterator that reconnects, with back-off, when the stream drops, until the log's final event, a refusal
// by Berth, or the caller's abort. It reconnects with Last-Event-ID (the id of the last event it yielded),
// so Berth first sends the events sent while it was disconnected: none is missed or yielded twice, also
// across a restart of Berth, as long as Berth still keeps them (an `events_lost` event says when it does not).

import { backoffDelay, delay, type BackoffOptions } from './delay.js';
import { BerthError, BerthNetworkError } from './errors.js';
import { readSse } from './sse.js';
import type { CallOptions } from './types.js';

/** Reconnection and resumption of a followed event stream. */
export interface FollowOptions extends CallOptions {
  /** Reconnect when the stream drops (default true). */
  reconnect?: boolean;
  /** Called each time the stream is open (first connection and every reconnection): events flow from here on. */
  onConnect?: () => void;
  /** Called before each reconnection attempt, with why the stream was lost. */
  onReconnect?: (attempt: number, reason: unknown) => void;
  /**
   * Resume after this event id (one a previous iteration yielded, kept by the caller): the first connection
   * already asks for what followed it. `0`: every event Berth keeps. Default: live events from now on.
   */
  lastEventId?: number;
}

/** Waits before reconnecting a dropped event stream: 0.25 s, 0.5 s, … at most 5 s; reset by any event. */
export const RECONNECT_BACKOFF: BackoffOptions = { initial: 250, max: 5000, jitter: 0.2 };

/** One log's stream: how to open it and where it ends. */
export interface FollowedLog {
  /** The log in error messages: `agent <id>`, `job <id>`. */
  readonly name: string;
  /** Opens the stream (the answer's body); `headers` carry Last-Event-ID on every connection but a fresh first one. */
  open(headers: Record<string, string>, signal: AbortSignal | undefined): Promise<ReadableStream<Uint8Array> | null>;
  /** The type of a frame without an `event:` line. */
  readonly untypedAs: string;
  /** Events after which the log has nothing more to say: the iteration ends there. */
  readonly final: ReadonlySet<string>;
  /** Whether a final event is yielded before the end (an agent's `exited` is news; a job's `closed` is not). */
  readonly yieldsFinal: boolean;
}

export async function* followEvents<E extends { readonly type: string }>(log: FollowedLog, options: FollowOptions): AsyncGenerator<E, void, undefined> {
  const { signal, reconnect = true, onConnect, onReconnect } = options;
  let lastEventId = options.lastEventId;
  let failures = 0;
  for (;;) {
    let lost: unknown;
    try {
      const headers: Record<string, string> = lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) };
      const body = await log.open(headers, signal);
      onConnect?.();
      for await (const message of readSse(body)) {
        const type = message.event ?? log.untypedAs;
        const data = message.data === '' ? {} : (JSON.parse(message.data) as Record<string, unknown>);
        failures = 0;
        const final = log.final.has(type);
        if (final && !log.yieldsFinal) return;
        // Berth's ids are whole numbers; anything else (a proxy's own stream) is not resumed from.
        const eventId = message.id !== undefined && /^\d+$/.test(message.id) ? Number(message.id) : undefined;
        if (eventId !== undefined) lastEventId = eventId;
        yield { ...data, type, ...(eventId !== undefined ? { id: eventId } : {}) } as unknown as E;
        if (final) return;
      }
      lost = new BerthNetworkError(`the event stream of ${log.name} ended without ${[...log.final].join(' or ')}`);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      // Berth refused the stream (unknown id, no access): reconnecting cannot help.
      if (error instanceof BerthError) throw error;
      lost = error instanceof BerthNetworkError ? error : new BerthNetworkError(`the event stream of ${log.name} broke off: ${(error as Error).message}`, { cause: error });
    }
    if (!reconnect) throw lost;
    failures += 1;
    onReconnect?.(failures, lost);
    await delay(backoffDelay(failures - 1, RECONNECT_BACKOFF), signal);
  }
}
