// Replay, then live, with no gap and no duplicate (docs/agents.md "Reconnecting without missing events").
// The subscriber subscribes to live events first and reads the log second: every event is either in the
// log already (StreamRecorder appends before it delivers) or arrives live; those that are both are skipped
// by id. A live subscription that dropped events (a slow reader, subscription.ts) is filled again from the
// log, so a slow reader loses nothing either, as long as the log still keeps what it missed.
import type { EventLog, StoredEvent } from '../../store/events/event-log.js';
import type { StreamEvent, WithId } from './stream-recorder.js';

/** Sent (without an id) when events the client asked for are no longer kept: it gets what is kept after them. */
/** Events read from the log at a time. */
const REPLAY_PAGE = 8;

export interface EventsLostEvent {
  readonly type: 'events_lost';
  /** The last id the client had (Last-Event-ID), or the last one this stream sent it before it fell behind. */
  readonly after: number;
  /** The newest id among the events that are no longer kept. */
  readonly lost_through: number;
  readonly at: string;
}

export interface LiveEvents<E> extends AsyncIterable<WithId<E>> {
  /** Events the live subscription dropped so far (its buffer was full). */
  readonly dropped: number;
}

export interface ReplayOptions<E> {
  readonly log: EventLog;
  readonly stream: string;
  /** Last-Event-ID: replay what is kept after it. Undefined: live events only, as a first connection. */
  readonly afterId: number | undefined;
  /** Subscribed before this is called. */
  readonly live: LiveEvents<E>;
  /** A stored event as the stream's event type. */
  readonly fromLog: (stored: StoredEvent) => WithId<E>;
  /** Types a stream has at most once (an agent's `exited`, also handed to a late subscriber without an id). */
  readonly once?: readonly string[];
  readonly now?: () => number;
}

export async function* replayThenLive<E extends StreamEvent>(options: ReplayOptions<E>): AsyncGenerator<WithId<E> | EventsLostEvent, void, undefined> {
  const { log, stream, live } = options;
  const now = options.now ?? Date.now;
  const seenOnce = new Set<string>();
  let last = options.afterId;
  let droppedSeen = live.dropped;

  // What the log keeps after `after`, with an events_lost notice first when part of it is gone. Read a few
  // events at a time: one may be megabytes (an agent's output line), and the reader waits for its client.
  async function* fromLogAfter(after: number): AsyncGenerator<WithId<E> | EventsLostEvent, void, undefined> {
    let from = after;
    for (let first = true; ; first = false) {
      const { events, lostThrough } = await log.after(stream, from, REPLAY_PAGE);
      if (first && lostThrough !== undefined) yield { type: 'events_lost', after, lost_through: lostThrough, at: new Date(now()).toISOString() };
      for (const stored of events) yield options.fromLog(stored);
      if (events.length < REPLAY_PAGE) return;
      from = events.at(-1)!.id;
    }
  }

  // Deduplicates and advances `last`; false when the event is not to be sent.
  const admit = (event: WithId<E>): boolean => {
    if (event.id !== undefined) {
      if (last !== undefined && event.id <= last) return false;
      last = event.id;
    }
    if (options.once?.includes(event.type)) {
      if (seenOnce.has(event.type)) return false;
      seenOnce.add(event.type);
    }
    return true;
  };

  if (last !== undefined) {
    for await (const event of fromLogAfter(last)) if (event.type === 'events_lost' || admit(event as WithId<E>)) yield event;
  }
  for await (const event of live) {
    if (live.dropped !== droppedSeen && last !== undefined) {
      droppedSeen = live.dropped;
      // The events dropped are after `last` and before those still queued: the log has them all.
      for await (const stored of fromLogAfter(last)) if (stored.type === 'events_lost' || admit(stored as WithId<E>)) yield stored;
    }
    if (admit(event)) yield event;
  }
}
