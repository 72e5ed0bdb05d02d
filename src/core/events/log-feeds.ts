// Live events written by other nodes (issue 26). With a shared event log, a stream's writer may be another
// node: a job accepted here and claimed there records its running and final statuses there, and this node's
// followers of it would otherwise wait forever. Each stream followed here has a feed: it publishes, in id
// order and once each, what the log holds after the last id it published, read when the log announces an
// event of the stream (EventNotices: NOTIFY), when the announcements flow again after a break, and on a slow
// poll that covers an announcement lost without a word. Events recorded here keep their in-process path
// (StreamRecorder -> publish); a feed admits each id once, so an event that comes both ways is published once.
//
// Order: within one stream, ids grow in commit order (postgres-event-log.ts), and one stream has one writer at
// a time (a job's: its accepting node, then its claimer), so reading after the last id published misses
// nothing. Memory: a feed holds one id; its events go to the subscribers' bounded buffers as local ones do.
import type { EventLog, StoredEvent } from '../../store/events/event-log.js';
import type { EventNotice, EventNotices } from '../../store/events/event-notices.js';

/** Events read from the log at a time. */
const READ_PAGE = 8;

export class StreamFeed {
  /** The highest id published; undefined: none yet (a first read starts at the stream's first kept event). */
  private last: number | undefined;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private closed = false;

  constructor(
    private readonly log: EventLog,
    readonly stream: string,
    private readonly publish: (stored: StoredEvent) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Whether an event with this id is still to be published (and, if so, counts it as published). */
  admit(id: number | undefined): boolean {
    if (id === undefined) return true;
    if (this.last !== undefined && id <= this.last) return false;
    this.last = id;
    return true;
  }

  /** Whether the event `id` of this stream was published already. */
  has(id: number): boolean {
    return this.last !== undefined && id <= this.last;
  }

  /** Reads what the log holds after the last id published and publishes it; calls during a read coalesce. */
  pull(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.reading) {
      this.readAgain = true;
      return this.reading;
    }
    this.reading = this.readAll()
      .catch((error: unknown) => this.onError(error))
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  close(): void {
    this.closed = true;
  }

  private async readAll(): Promise<void> {
    do {
      this.readAgain = false;
      for (;;) {
        const { events } = await this.log.after(this.stream, this.last ?? 0, READ_PAGE);
        for (const stored of events) {
          if (this.closed) return;
          if (this.admit(stored.id)) this.publish(stored);
        }
        if (events.length < READ_PAGE) break;
      }
    } while (this.readAgain && !this.closed);
  }
}

/** The feeds of the streams followed on this node, driven by the log's notices and a slow poll. */
export class LogFeeds {
  private readonly feeds = new Map<string, StreamFeed>();
  private poll: NodeJS.Timeout | undefined;
  private notices: EventNotices | undefined;

  constructor(private readonly pollMs: number) {}

  start(notices: EventNotices): void {
    this.notices = notices;
    notices.start((notice) => this.noticed(notice));
    this.poll = setInterval(() => this.pullAll(), this.pollMs);
    this.poll.unref();
  }

  /** Stops the notices and the poll; a feed's read under way publishes nothing more (the log closes next). */
  async stop(): Promise<void> {
    clearInterval(this.poll);
    for (const feed of this.feeds.values()) feed.close();
    this.feeds.clear();
    await this.notices?.stop();
  }

  /** Feeds `feed` from here on (while its stream is followed here). */
  add(feed: StreamFeed): void {
    this.feeds.set(feed.stream, feed);
  }

  remove(feed: StreamFeed): void {
    if (this.feeds.get(feed.stream) === feed) this.feeds.delete(feed.stream);
    feed.close();
  }

  private noticed(notice: EventNotice): void {
    if (notice.kind === 'listening') return this.pullAll();
    const feed = this.feeds.get(notice.stream);
    // An event published already (recorded here, or read with an earlier one) needs no read.
    if (feed && !feed.has(notice.id)) void feed.pull();
  }

  private pullAll(): void {
    for (const feed of this.feeds.values()) void feed.pull();
  }
}
