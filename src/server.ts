// Builds and starts a whole Berth from the named builders of src/composition/, in this order: the Podman
// runtime and agent network, the stores, what a previous process left, the runs' file systems, the model's
// access, metrics, the model gateway, authentication, the engine containers, the pools, runs and jobs,
// agents, and the API. stop() undoes it all (composition/teardown.ts): first the work, in order (the
// credentials kept at a detach, runs and jobs stopped, agents stopped, git clones ended, the API closed),
// then every resource in reverse order of creation.
import { mkdir } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { startTracing } from './tracing.js';
import type { AgentService } from './core/agents/agent-service.js';
import type { EngineAccess } from './core/engine-access.js';
import type { RunGrants } from './core/gateway/run-grants.js';
import type { EnginePools } from './core/pool/engine-pools.js';
import { stopWork } from './core/shutdown.js';
import type { WorkspaceService } from './core/workspaces/workspace-service.js';
import type { PodmanRuntime } from './runtime/podman/podman-runtime.js';
import { stopBuilds } from './runtime/podman/rootless-build.js';
import type { UsageStore } from './store/usage/usage-store.js';
import { buildAgentServices } from './composition/agent-services.js';
import { buildApiServices } from './composition/api-services.js';
import { buildAuth } from './composition/auth.js';
import { exposeNodeLease, openDatabase } from './composition/database.js';
import { buildForwarding } from './composition/forwarding.js';
import { buildEngineContainers } from './composition/engine-containers.js';
import { buildGateway } from './composition/gateway.js';
import { buildHttp, listen } from './composition/http.js';
import { reclaimLeftovers } from './composition/leftovers.js';
import { startMetrics } from './composition/metrics.js';
import { buildModelAccess } from './composition/model-access.js';
import { buildPools } from './composition/pools.js';
import { buildRunServices } from './composition/run-services.js';
import { buildRuntime } from './composition/runtime.js';
import { buildStorage } from './composition/storage.js';
import { openStores } from './composition/stores.js';
import { Teardown } from './composition/teardown.js';

export interface RunningBerth {
  readonly app: FastifyInstance;
  readonly url: string;
  readonly metricsUrl: string;
  readonly runtime: PodmanRuntime;
  readonly engineAccess: EngineAccess;
  /** The pre-started engines of runs and agents (SERVICE_POOL_SIZE, SERVICE_AGENT_POOL_SIZE). */
  readonly pools: EnginePools;
  /** Workspaces (docs/workspaces.md): unavailable (503) on a Berth that cannot mount file systems. */
  readonly workspaces: WorkspaceService;
  /** The model gateway and egress proxy: the URL engine containers use, and its port on the host. */
  readonly gateway: { readonly url: string; readonly port: number };
  /** The per-run credentials the gateway admits. */
  readonly grants: RunGrants;
  /** What the gateway recorded (model requests, egress decisions). */
  readonly usage: UsageStore;
  /** Resolves once every run answered before its end (at its result) has also ended: container removed, transcript kept. */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** What tests may change in a Berth (never set in production). */
export interface BerthHooks {
  /** Host name → IPv4 address the egress proxy connects to for it, without the internal-address check (local servers standing for outside hosts). */
  readonly egressResolveOverride?: ReadonlyMap<string, string>;
}

export async function startBerth(configured: Config, logger: Logger, hooks: BerthHooks = {}): Promise<RunningBerth> {
  // Rootless Podman gives containers a route out (slirp4netns) and keeps its bridges out of the host's
  // nftables: egress cannot be enforced there, and no policy but open is accepted (docs/egress.md).
  const rootful = process.getuid?.() === 0;
  const config: Config = rootful ? configured : { ...configured, egress: { ...configured.egress, enforced: false } };
  if (!rootful && !config.egress.allowOpen) {
    throw new Error(
      'rootless Podman: egress cannot be enforced (containers have a route out through slirp4netns and the host\'s nftables cannot reach their bridges); set SERVICE_EGRESS_ALLOW_OPEN=true to run with open egress, or run Berth as root',
    );
  }
  const teardown = new Teardown(logger);
  try {
    // Released last of all: spans of the shutdown itself are still exported.
    teardown.releaseLast(startTracing({ endpoint: config.tracing.endpoint, sampleRatio: config.tracing.sampleRatio, serviceVersion: config.version, instance: config.instanceName, log: logger }));
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    const base = { config, logger, teardown };

    // The shared database and this node's lease first (SERVICE_DATABASE_URL; undefined: the SQLite files): a
    // node refused its name touches nothing, and the pool is released after every store.
    const shared = await openDatabase(base);
    const database = shared?.database;
    const { podman, runtime, agentNetwork } = await buildRuntime({ ...base, rootful });
    const stores = await openStores({ ...base, database });
    const liveRuns = await reclaimLeftovers({ ...base, runtime, stores });
    const { noDisks, sessions, workspaces, workspaceDisks } = await buildStorage({ ...base, database, liveRuns });
    const { engineAccess, access, grants } = await buildModelAccess({ ...base, database, runtime, liveRuns });
    const { metrics, url: metricsUrl } = await startMetrics(base);
    if (shared) exposeNodeLease(metrics.registry, shared.node);
    const gateway = await buildGateway({
      ...base, rootful, podman, runtime, agentNetwork, access, grants, usage: stores.usage, metrics, resolveOverride: hooks.egressResolveOverride,
    });
    const auth = await buildAuth({ ...base, database });

    const shutdown = new AbortController();
    const containers = await buildEngineContainers({ ...base, rootful, runtime, agentNetwork, liveRuns, noDisks, sessions, engineAccess, grants, gateway, metrics, ...(database ? { database } : {}) });
    const pools = await buildPools({ config, runtime, sessions, containers, metrics, logger });
    const { runs, jobs } = await buildRunServices({
      ...base, runtime, stores, sessions, workspaces, containers, pools, engineAccess, grants, budgets: gateway.budgets, metrics, shutdownSignal: shutdown.signal, shared,
    });

    // Read when the stop comes: undefined if the start failed before the agents existed.
    let agents: AgentService | undefined;
    teardown.endWork(() =>
      stopWork(
        config.shutdown,
        {
          pools, runs, jobs, agents,
          abortRuns: () => {
            shutdown.abort();
            // A run's build does not see the signal: ended here, or the drain below waits for it.
            void stopBuilds(config.instanceName);
          },
          inFlight: () => ({ runs: runs.inFlightRuns(), jobs: jobs.inFlightJobs(), agents: agents?.generatingAgents() ?? [] }),
        },
        logger,
      ),
    );
    await pools.start();
    agents = buildAgentServices({ config, runtime, stores, sessions, runs, containers, budgets: gateway.budgets, metrics, logger });
    await agents.restore();

    const services = await buildApiServices({
      ...base, runtime, engineAccess, auth, runs, jobs, agents, sessions, workspaces, workspaceDisks, containers,
      gateway: { url: gateway.url, grants }, usage: stores.usage, nodeLease: shared?.node, metrics,
    });
    // Several nodes: requests for another node's agents and running jobs are forwarded there.
    const cluster = database ? buildForwarding({ ...base, database, metrics }) : undefined;
    const app = await buildHttp({ ...base, services: cluster ? { ...services, cluster } : services });
    const url = await listen(app, config.address);
    logger.info({ url, metrics: metricsUrl }, 'berth is listening');

    return {
      app,
      url,
      metricsUrl,
      runtime: podman,
      engineAccess,
      pools,
      workspaces,
      gateway: { url: gateway.url, port: gateway.port },
      grants,
      usage: stores.usage,
      settled: () => sessions.settled(),
      stop: () => teardown.stop(),
    };
  } catch (error) {
    await teardown.stop();
    throw error;
  }
}
