// Berth's durable state, each store in its own database under SERVICE_DATA_DIR: async jobs, persistent
// agents, the replayable event log, and what the model gateway records.
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { SqliteAgentStore } from '../store/agents/sqlite-agent-store.js';
import { SqliteEventLog } from '../store/events/sqlite-event-log.js';
import { SqliteJobStore } from '../store/jobs/sqlite-job-store.js';
import { SqliteUsageStore } from '../store/usage/sqlite-usage-store.js';
import type { Teardown } from './teardown.js';

export interface Stores {
  readonly jobs: SqliteJobStore;
  readonly agents: SqliteAgentStore;
  readonly events: SqliteEventLog;
  readonly usage: SqliteUsageStore;
}

export function openStores({ config, logger, teardown }: { readonly config: Config; readonly logger: Logger; readonly teardown: Teardown }): Stores {
  const jobs = new SqliteJobStore(join(config.dataDir, 'jobs.db'));
  teardown.release(() => jobs.close());
  const agents = new SqliteAgentStore(join(config.dataDir, 'agents.db'));
  teardown.release(async () => agents.close());
  // The replayable event log (store/events, docs/agents.md): closed after the agents and jobs that write it
  // (resources are released in reverse); pruned to SERVICE_EVENTS_MAX_AGE every minute at most.
  const events = new SqliteEventLog(join(config.dataDir, 'events.db'), config.events);
  teardown.release(() => events.close());
  const pruneEvents = () => void events.prune(Date.now()).catch((error: unknown) => logger.warn({ err: error }, 'pruning the event log failed; the next pass retries'));
  pruneEvents();
  const eventPruner = setInterval(pruneEvents, Math.max(1_000, Math.min(60_000, config.events.maxAgeMs)));
  eventPruner.unref();
  teardown.release(async () => clearInterval(eventPruner));
  // What the model gateway records (store/usage/): budgets are counted from it, GET /usage reads it. Closed
  // after the gateway (resources are released in reverse), so no record of a request in flight is lost.
  const usage = new SqliteUsageStore(join(config.dataDir, 'usage.db'));
  teardown.release(async () => usage.close());
  return { jobs, agents, events, usage };
}
