// Fan-out of an agent's events to its subscribers, each with its own buffer bounded in events and in bytes:
// a slow subscriber loses events (counted in `dropped`) instead of slowing the agent or growing without
// bound, however large single events are.
// The end of a subscription (exited, then closed) is always delivered, beyond the capacity if need be,
// so that every subscriber learns why its stream ends.
import type { AgentEvent } from './agent-types.js';

export const SUBSCRIBER_BUFFER = 32;
/** Bytes of events (as JSON) one subscriber may have queued. */
export const SUBSCRIBER_BUFFER_BYTES = 4 * 1024 * 1024;

/** Anything with an event name: an agent's events, a job's. */
type NamedEvent = { readonly type: string };

export class Subscription<E extends NamedEvent = AgentEvent> implements AsyncIterable<E> {
  private readonly queue: { event: E; bytes: number }[] = [];
  private queuedBytes = 0;
  private waiting: (() => void) | undefined;
  private ended = false;
  dropped = 0;

  constructor(
    private readonly capacity: number,
    private readonly onClose: (subscription: Subscription<E>) => void,
    private readonly capacityBytes = SUBSCRIBER_BUFFER_BYTES,
  ) {}

  /** Queues an event of `bytes` (its JSON size); false when the buffer was full and the event was dropped. */
  push(event: E, bytes = 0): boolean {
    if (this.ended) return false;
    if (this.queue.length >= this.capacity || (this.queue.length > 0 && this.queuedBytes + bytes > this.capacityBytes)) {
      this.dropped += 1;
      return false;
    }
    this.queue.push({ event, bytes });
    this.queuedBytes += bytes;
    this.wake();
    return true;
  }

  /** Queues the final events whatever the buffer holds, then ends the subscription. */
  finish(finalEvents: readonly E[]): void {
    if (this.ended) return;
    this.queue.push(...finalEvents.map((event) => ({ event, bytes: 0 })));
    this.ended = true;
    this.wake();
  }

  /** The subscriber leaves (client disconnected): nothing more is queued. */
  close(): void {
    if (!this.ended) this.ended = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.onClose(this);
    this.wake();
  }

  get size(): number {
    return this.queue.length;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<E> {
    try {
      for (;;) {
        const next = this.queue.shift();
        if (next) {
          this.queuedBytes -= next.bytes;
          yield next.event;
          continue;
        }
        if (this.ended) return;
        await new Promise<void>((resolve) => (this.waiting = resolve));
      }
    } finally {
      this.close();
    }
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.();
  }
}

export class EventFanout<E extends NamedEvent = AgentEvent> {
  private readonly subscriptions = new Set<Subscription<E>>();

  constructor(private readonly capacity = SUBSCRIBER_BUFFER) {}

  subscribe(): Subscription<E> {
    const subscription = new Subscription<E>(this.capacity, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(subscription);
    return subscription;
  }

  publish(event: E): void {
    if (this.subscriptions.size === 0) return;
    const bytes = Buffer.byteLength(JSON.stringify(event));
    for (const subscription of this.subscriptions) subscription.push(event, bytes);
  }

  /** Delivers the final events to every subscriber and ends them all. */
  finish(finalEvents: readonly E[]): void {
    for (const subscription of [...this.subscriptions]) subscription.finish(finalEvents);
    this.subscriptions.clear();
  }

  get count(): number {
    return this.subscriptions.size;
  }
}
