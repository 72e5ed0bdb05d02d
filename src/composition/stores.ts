// Berth's durable state: async jobs, persistent agents, the replayable event log, and what the model gateway
// records. Each store in its own SQLite database under SERVICE_DATA_DIR, or, with SERVICE_DATABASE_URL, in the
// shared PostgreSQL database (jobs and agents opened for this node: each node's start follows again its own).
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AgentStore } from '../store/agents/agent-store.js';
import { PostgresAgentStore } from '../store/agents/postgres-agent-store.js';
import { SqliteAgentStore } from '../store/agents/sqlite-agent-store.js';
import type { EventLog } from '../store/events/event-log.js';
import { PostgresEventLog } from '../store/events/postgres-event-log.js';
import { SqliteEventLog } from '../store/events/sqlite-event-log.js';
import type { JobStore } from '../store/jobs/job-store.js';
import { PostgresJobStore } from '../store/jobs/postgres-job-store.js';
import { SqliteJobStore } from '../store/jobs/sqlite-job-store.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import { PostgresUsageStore } from '../store/usage/postgres-usage-store.js';
import { SqliteUsageStore } from '../store/usage/sqlite-usage-store.js';
import type { UsageStore } from '../store/usage/usage-store.js';
import type { Teardown } from './teardown.js';

export interface Stores {
  readonly jobs: JobStore;
  readonly agents: AgentStore;
  readonly events: EventLog;
  readonly usage: UsageStore;
}

export interface StoresInputs {
  readonly config: Config;
  /** The shared database (SERVICE_DATABASE_URL); undefined: the SQLite files. */
  readonly database: PostgresDatabase | undefined;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export async function openStores({ config, database, logger, teardown }: StoresInputs): Promise<Stores> {
  const file = (name: string) => join(config.dataDir, name);
  const jobs: JobStore = database ? await PostgresJobStore.open(database, config.cluster.nodeName) : new SqliteJobStore(file('jobs.db'));
  teardown.release(() => jobs.close());
  const agents: AgentStore = database ? await PostgresAgentStore.open(database, config.cluster.nodeName) : new SqliteAgentStore(file('agents.db'));
  teardown.release(() => agents.close());
  // The replayable event log (store/events, docs/agents.md): closed after the agents and jobs that write it
  // (resources are released in reverse); pruned to SERVICE_EVENTS_MAX_AGE every minute at most.
  const events: EventLog = database ? await PostgresEventLog.open(database, config.events) : new SqliteEventLog(file('events.db'), config.events);
  teardown.release(() => events.close());
  const pruneEvents = () => void events.prune(Date.now()).catch((error: unknown) => logger.warn({ err: error }, 'pruning the event log failed; the next pass retries'));
  pruneEvents();
  const eventPruner = setInterval(pruneEvents, Math.max(1_000, Math.min(60_000, config.events.maxAgeMs)));
  eventPruner.unref();
  teardown.release(async () => clearInterval(eventPruner));
  // What the model gateway records (store/usage/): budgets are counted from it, GET /usage reads it. Closed
  // after the gateway (resources are released in reverse), so no record of a request in flight is lost.
  const usage: UsageStore = database ? await PostgresUsageStore.open(database) : new SqliteUsageStore(file('usage.db'));
  teardown.release(() => usage.close());
  return { jobs, agents, events, usage };
}
