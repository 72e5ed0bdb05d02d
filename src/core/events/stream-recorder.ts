// One stream's writer to the event log (store/events): each event is appended, in the order it was
// recorded, and only then delivered live with its id. A subscriber that subscribes and then reads the log
// therefore misses nothing: an event delivered before it subscribed is already in the log (replay.ts).
import type { EventLog } from '../../store/events/event-log.js';

/** An event as its stream sends it: `type` is the SSE event name, the whole object its data. */
export interface StreamEvent {
  readonly type: string;
  /** ISO time of the event. */
  readonly at: string;
}

export type WithId<E> = E & { readonly id?: number };

export class StreamRecorder {
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly log: EventLog,
    readonly stream: string,
    /** An append that failed (a full disk): the event is still delivered, without an id, and so never replayed. */
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Appends `event`, then hands it with its id to `deliver`; both in call order. */
  record<E extends StreamEvent>(event: E, deliver: (event: WithId<E>) => void): void {
    this.chain = this.chain.then(async () => {
      let id: number | undefined;
      try {
        id = (await this.log.append(this.stream, event.type, event as unknown as Record<string, unknown>, Date.parse(event.at) || Date.now())).id;
      } catch (error) {
        this.onError(error);
      }
      deliver(id === undefined ? event : { ...event, id });
    });
  }

  /** Runs `step` once every event recorded so far has been delivered (events recorded later wait for it). */
  after(step: () => void): void {
    this.chain = this.chain.then(step);
  }

  /** Resolves once every event recorded so far is appended and delivered. */
  flushed(): Promise<void> {
    return this.chain;
  }
}
