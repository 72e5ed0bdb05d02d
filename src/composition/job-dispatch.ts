// Async jobs on a shared database (issue 26): this node's share of the cluster's job queue, woken by LISTEN/NOTIFY
// on one connection of the pool, the dispatch-latency histogram, and the watch for lost nodes (whose jobs and
// agents this node may take over). Without a database: nothing (each node runs its own jobs in process).
import { Histogram, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { NodeLossWatcher } from '../core/cluster/node-loss.js';
import type { JobService, JobServiceDependencies } from '../core/jobs/job-service.js';
import { PostgresAgentStore } from '../store/agents/postgres-agent-store.js';
import { PostgresJobStore } from '../store/jobs/postgres-job-store.js';
import { PostgresJobWakeups } from '../store/jobs/postgres-job-wakeups.js';
import type { SharedDatabase } from './database.js';
import type { Stores } from './stores.js';
import type { Teardown } from './teardown.js';

/**
 * berth_job_dispatch_seconds{path}: from a job's submission to its claim, on the database's clock. `local`:
 * claimed at submission by its accepting node (a slot was free there: 0); `queued`: claimed from the queue by
 * any node, woken by NOTIFY (or the poll).
 */
function dispatchHistogram(registry: Registry): Histogram<'path'> {
  const histogram = new Histogram({
    name: 'berth_job_dispatch_seconds',
    help: 'Seconds from an async job\'s submission to its claim by a node (shared database); path="local": claimed at submission by the accepting node, path="queued": claimed from the queue.',
    labelNames: ['path'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  for (const path of ['local', 'queued']) histogram.zero({ path });
  return histogram;
}

/** The `shared` dependency of the job service; undefined without a database. */
export function sharedJobQueue(
  { shared, stores, registry, logger, sharedDir }: {
    readonly shared: SharedDatabase | undefined; readonly stores: Pick<Stores, 'jobs'>; readonly registry: Registry; readonly logger: Logger;
    /** SERVICE_SHARED_DIR: set, a session's workspace is restored on any node, so its jobs are not pinned. */
    readonly sharedDir: string | undefined;
  },
): JobServiceDependencies['shared'] {
  if (!shared) return undefined;
  if (!(stores.jobs instanceof PostgresJobStore)) throw new Error('a shared database needs the PostgreSQL job store');
  const histogram = dispatchHistogram(registry);
  return {
    queue: stores.jobs,
    wakeups: new PostgresJobWakeups(shared.database, (error) => logger.warn({ err: error }, 'the job queue\'s LISTEN connection failed; listening again shortly (the poll claims meanwhile)')),
    dispatched: (seconds, path) => histogram.observe({ path }, seconds),
    sessionsMove: sharedDir !== undefined,
  };
}

/**
 * Watches for lost nodes (every third of the lease) and, when this node loses its own lease, stops its jobs.
 * Stopped before the job service closes (resources are released in reverse).
 */
export function watchNodeLoss(
  { config, shared, stores, jobs, logger, teardown }: {
    readonly config: Config; readonly shared: SharedDatabase | undefined; readonly stores: Pick<Stores, 'agents'>; readonly jobs: JobService;
    readonly logger: Logger; readonly teardown: Teardown;
  },
): void {
  if (!shared) return;
  const agents = stores.agents;
  if (!(agents instanceof PostgresAgentStore)) throw new Error('a shared database needs the PostgreSQL agent store');
  const watcher = new NodeLossWatcher({ registry: shared.node, handlers: { jobs, agents }, leaseMs: config.cluster.nodeLeaseMs, log: logger });
  shared.node.whenLost(() => {
    logger.error({ node: config.cluster.nodeName }, 'this node lost its lease: it claims no more jobs and stops the ones it runs');
    void watcher.stop();
    jobs.leaseLost().catch((error: unknown) => logger.error({ err: error }, 'stopping the jobs of a node that lost its lease failed'));
  });
  watcher.start();
  teardown.release(() => watcher.stop());
}
