// The event log's notices on PostgreSQL (issue 26): one connection per node held for `LISTEN berth_events`, on
// which the events table's trigger (migrations/postgres/002_notify_events.sql) announces every appended event
// at its commit as '<stream>:<id>'. The same pattern as the job queue's wake-ups
// (store/jobs/postgres-job-wakeups.ts): the connection is taken from the node's pool and held; when it fails
// (the server restarted, the network dropped, an administrator ended it) it is closed, and a new one listens
// after a short back-off. Each new LISTEN is announced as `listening`: what was appended while no connection
// listened is read from the log then; the reader's slow poll covers a connection that died without a word.
import type pg from 'pg';
import type { PostgresDatabase } from '../postgres/database.js';
import { parseEventNotice, type EventNotice, type EventNotices } from './event-notices.js';

export const EVENT_CHANNEL = 'berth_events';

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;

export class PostgresEventNotices implements EventNotices {
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Ends the current LISTEN (stop()). */
  private endListening: (() => void) | undefined;
  private retryTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  constructor(
    private readonly database: PostgresDatabase,
    private readonly onError: (error: Error) => void,
  ) {}

  start(on: (notice: EventNotice) => void): void {
    if (this.loop) throw new Error('the event notices are already started');
    this.loop = this.listen(on);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.endListening?.();
    if (this.retryTimer) {
      clearTimeout(this.retryTimer.timer);
      this.retryTimer.resolve();
    }
    await this.loop;
  }

  private async listen(on: (notice: EventNotice) => void): Promise<void> {
    let retryMs = RETRY_FIRST_MS;
    while (!this.stopped) {
      try {
        await this.database.withConnection((client) => this.listenOn(client, on, () => (retryMs = RETRY_FIRST_MS)));
      } catch (error) {
        if (this.stopped) return;
        this.onError(error instanceof Error ? error : new Error(String(error)));
        await new Promise<void>((resolve) => {
          this.retryTimer = { timer: setTimeout(resolve, retryMs), resolve };
        });
        this.retryTimer = undefined;
        retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
      }
    }
  }

  /** Listens on `client` until stop() (resolves) or the connection fails (rejects: withConnection closes it). */
  private async listenOn(client: pg.PoolClient, on: (notice: EventNotice) => void, listening: () => void): Promise<void> {
    const notified = (message: pg.Notification) => {
      if (message.channel !== EVENT_CHANNEL) return;
      const notice = parseEventNotice(message.payload);
      if (notice) on(notice);
    };
    let failed!: (error: Error) => void;
    const ended = new Promise<void>((resolve, reject) => {
      this.endListening = resolve;
      failed = reject;
    });
    const onError = (error: Error) => failed(error);
    const onEnd = () => failed(new Error('the LISTEN connection to the event log ended'));
    client.on('notification', notified);
    client.on('error', onError);
    client.on('end', onEnd);
    try {
      if (this.stopped) return;
      await client.query(`LISTEN ${EVENT_CHANNEL}`);
      listening();
      on({ kind: 'listening' });
      await ended;
      await client.query(`UNLISTEN ${EVENT_CHANNEL}`);
    } finally {
      this.endListening = undefined;
      client.off('notification', notified);
      client.off('end', onEnd);
      // Kept until the connection is released: an error on a connection nobody listens to would be thrown.
      void ended.catch(() => undefined);
      setImmediate(() => client.off('error', onError));
    }
  }
}
