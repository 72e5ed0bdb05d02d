// Runs and async jobs: the use case "run a prompt" over the engine containers and the pools, and the jobs
// that run it in the background and report by webhook. Jobs a previous process left unfinished are followed
// again or reconciled here, before the API listens.
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Budgets } from '../core/gateway/budgets.js';
import type { EngineAccess } from '../core/engine-access.js';
import type { RunGrants } from '../core/gateway/run-grants.js';
import { JobEvents } from '../core/jobs/job-events.js';
import { JobService } from '../core/jobs/job-service.js';
import type { EnginePools } from '../core/pool/engine-pools.js';
import { RunService } from '../core/runs/run-service.js';
import { RunWorkspaces } from '../core/runs/run-workspace.js';
import type { SessionStore } from '../core/sessions/session-store.js';
import { WebhookDeliverer } from '../core/webhooks/deliverer.js';
import { DestinationPolicy } from '../core/webhooks/destination-policy.js';
import type { WorkspaceService } from '../core/workspaces/workspace-service.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import { loopWorkdirBinder } from '../runtime/workdir-binds.js';
import type { SharedDatabase } from './database.js';
import type { EngineContainers } from './engine-containers.js';
import { eventFeeds } from './event-feeds.js';
import { sharedJobQueue, watchNodeLoss } from './job-dispatch.js';
import type { Stores } from './stores.js';
import type { Teardown } from './teardown.js';

export interface RunServiceInputs {
  readonly config: Config;
  readonly runtime: ContainerRuntime;
  readonly stores: Pick<Stores, 'jobs' | 'events' | 'agents'>;
  /** The shared database and this node's lease: jobs are dispatched through it, lost nodes taken over. */
  readonly shared?: SharedDatabase | undefined;
  readonly sessions: SessionStore;
  readonly workspaces: WorkspaceService;
  readonly containers: Pick<EngineContainers, 'images' | 'executor' | 'slots' | 'stacks'>;
  readonly pools: EnginePools;
  readonly engineAccess: EngineAccess;
  readonly grants: RunGrants;
  readonly budgets: Budgets;
  readonly metrics: Metrics;
  /** Aborted at stop: every run in flight is cancelled and its container removed. */
  readonly shutdownSignal: AbortSignal;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export interface RunServices {
  readonly runs: RunService;
  readonly jobs: JobService;
}

export async function buildRunServices(inputs: RunServiceInputs): Promise<RunServices> {
  const { config, stores, sessions, containers, pools, metrics, logger, teardown } = inputs;
  const webhookDestinations = new DestinationPolicy(config.webhooks.allowedHosts);
  const runs = new RunService({
    config,
    runtime: inputs.runtime,
    sessions,
    images: containers.images,
    executor: containers.executor,
    engineAccess: inputs.engineAccess,
    grants: inputs.grants,
    // A caller whose daily model budget is spent is refused before anything of a run exists.
    budgets: inputs.budgets,
    slots: containers.slots,
    pool: pools.run,
    agentPool: pools.agent,
    webhookDestinations,
    log: logger,
    shutdownSignal: inputs.shutdownSignal,
    stacks: containers.stacks,
    // A workspace at each run's workdir: named, the session's own, or a fork's copy (core/runs/run-workspace.ts).
    workspaces: new RunWorkspaces({ workspaces: inputs.workspaces, binder: loopWorkdirBinder, sessionExists: (id) => sessions.exists(id), log: logger }),
    observer: {
      runFinished: (mode, outcome, durationMs, phases) => {
        metrics.runs.inc({ mode, outcome });
        metrics.runDuration.observe({ mode }, durationMs / 1000);
        for (const [phase, ms] of Object.entries(phases)) metrics.runPhaseDuration.observe({ phase }, ms / 1000);
      },
      containerStarted: () => metrics.containersRunning.inc(),
      containerStopped: () => metrics.containersRunning.dec(),
    },
  });
  if (config.webhooks.signingSecret === '') logger.warn('SERVICE_WEBHOOK_SIGNING_SECRET is empty: webhooks are sent unsigned');
  const deliverer = new WebhookDeliverer(config.webhooks, {
    userAgent: `Berth/${config.version}`,
    observer: { attempt: (outcome) => metrics.webhookDeliveries.inc({ outcome }) },
    destinations: webhookDestinations,
  });
  teardown.release(() => deliverer.close());
  // Every status a job's record takes is also a replayable event of the job (core/jobs/job-events.ts); with a
  // shared database, what other nodes record reaches this node's followers too (composition/event-feeds.ts).
  const jobEvents = new JobEvents(
    stores.events,
    (error, jobId) => logger.error({ err: error, jobId }, 'a job event could not be kept in the event log, or read from it for a follower'),
    Date.now,
    eventFeeds({ shared: inputs.shared, logger, teardown }),
  );
  const jobs = new JobService({
    store: jobEvents.recording(stores.jobs),
    events: jobEvents,
    runs,
    webhooks: deliverer,
    maxConcurrentRuns: config.maxConcurrentRuns,
    retentionMs: config.jobs.retentionMs,
    log: logger,
    shutdownSignal: inputs.shutdownSignal,
    observer: { jobCounts: (counts) => Object.entries(counts).forEach(([status, n]) => metrics.jobs.set({ status }, n)) },
    shared: sharedJobQueue({ shared: inputs.shared, stores, registry: metrics.registry, logger, sharedDir: config.cluster.sharedDir }),
  });
  // At stop this runs after the runs were cancelled (resources are released after the work), to record their ends.
  teardown.release(() => jobs.close());
  await jobs.start();
  watchNodeLoss({ config, shared: inputs.shared, stores, jobs, logger, teardown });
  return { runs, jobs };
}
