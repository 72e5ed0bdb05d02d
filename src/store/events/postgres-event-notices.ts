// The event log's notices on PostgreSQL (issue 26), on `LISTEN berth_events`: the events table's trigger
// (migrations/postgres/002_notify_events.sql) announces every appended event at its commit as '<stream>:<id>'.
// Each new LISTEN is announced as `listening`: what was appended while no connection listened is read from the
// log then; the reader's slow poll covers a connection that died without a word.
import type { PostgresDatabase } from '../postgres/database.js';
import { PostgresChannelListener } from '../postgres/channel-listener.js';
import { parseEventNotice, type EventNotice, type EventNotices } from './event-notices.js';

export const EVENT_CHANNEL = 'berth_events';

export class PostgresEventNotices implements EventNotices {
  private readonly listener: PostgresChannelListener;

  constructor(database: PostgresDatabase, onError: (error: Error) => void) {
    this.listener = new PostgresChannelListener(database, EVENT_CHANNEL, onError);
  }

  start(on: (notice: EventNotice) => void): void {
    this.listener.start({
      notified: (payload) => {
        const notice = parseEventNotice(payload);
        if (notice) on(notice);
      },
      listening: () => on({ kind: 'listening' }),
    });
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }
}
