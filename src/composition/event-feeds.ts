// Events other nodes append to the shared event log, delivered to this node's followers (issue 26): the log's
// notices (LISTEN berth_events on one connection of the pool) and a slow poll drive the feeds of the streams
// followed here (core/events/log-feeds.ts). Without a database: none (every event is recorded in process).
import type { Logger } from 'pino';
import { LogFeeds } from '../core/events/log-feeds.js';
import { PostgresEventNotices } from '../store/events/postgres-event-notices.js';
import type { SharedDatabase } from './database.js';
import type { Teardown } from './teardown.js';

/**
 * The safety net for a notice lost without a word (a LISTEN connection that died silently): every stream
 * followed here is read again this often. Slow on purpose: notices are the path.
 */
export const EVENT_FEED_POLL_MS = 10_000;

export function eventFeeds(
  { shared, logger, teardown }: { readonly shared: SharedDatabase | undefined; readonly logger: Logger; readonly teardown: Teardown },
): LogFeeds | undefined {
  if (!shared) return undefined;
  const feeds = new LogFeeds(EVENT_FEED_POLL_MS);
  feeds.start(new PostgresEventNotices(shared.database, (error) => logger.warn({ err: error }, 'the event log\'s LISTEN connection failed; listening again shortly (followers are read by the poll meanwhile)')));
  teardown.release(() => feeds.stop());
  return feeds;
}
