// Builds and starts a whole Berth: Podman connection, leftovers reaped, sessions, engine access (with the
// embedded offline model when nothing else is configured), metrics listener, HTTP API. stop() undoes it
// all in reverse: runs are cancelled (their containers removed) before the listeners close.
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { USERNS_SIZE, type Config } from './config.js';
import { buildApp } from './http/app.js';
import { checkoutCommit, versionInfo } from './version.js';
import { startTracing } from './tracing.js';
import { StreamLimit, type SseOptions } from './http/sse.js';
import { startMetricsServer } from './http/metrics-server.js';
import { createMetrics } from './metrics/metrics.js';
import { MISS_REASONS } from './core/pool/pool-match.js';
import { PodmanClient } from './runtime/podman/client.js';
import { PodmanRuntime } from './runtime/podman/podman-runtime.js';
import { startPodmanService, type PodmanService } from './runtime/podman/service-process.js';
import { GRANT_LABEL, INSTANCE_LABEL, RUN_LABEL, STACK_INSTANCE_LABEL, STACK_LABEL } from './runtime/container-runtime.js';
import { NetworkIsolation } from './runtime/podman/network-isolation.js';
import { prepareEngineImage } from './core/runs/engine-image.js';
import { withTranslatedErrors } from './core/runtime-errors.js';
import { VolumeStaging } from './runtime/volume-staging.js';
import { LoopDisks, unshareMountsBelow } from './runtime/run-disk.js';
import { removeLeftoverBuilds, stopBuilds } from './runtime/podman/rootless-build.js';
import { StackDisks } from './runtime/stack-disk.js';
import { reapLeftovers } from './core/reaper.js';
import { SessionStore } from './core/sessions/session-store.js';
import { SessionService } from './core/sessions/session-service.js';
import { stackGrantId } from './core/compose/service-network.js';
import { Stacks } from './core/compose/stacks.js';
import { EnginePool, type PoolKind } from './core/pool/engine-pool.js';
import { EnginePools } from './core/pool/engine-pools.js';
import { hostCpu } from './runtime/host-cpu.js';
import { stopWork } from './core/shutdown.js';
import { SqliteAgentStore } from './store/agents/sqlite-agent-store.js';
import { SqliteEventLog } from './store/events/sqlite-event-log.js';
import { validateRunRequest } from './core/validation/validate-run.js';
import { registerSessionRoutes } from './http/routes/sessions.js';
import { EngineAccess, HOST_FROM_CONTAINER } from './core/engine-access.js';
import { RunGrants } from './core/gateway/run-grants.js';
import { SqliteGrantStore } from './store/gateway/sqlite-grant-store.js';
import { ImageCheck } from './core/runs/image-check.js';
import { RunExecutor } from './core/runs/run-executor.js';
import { RunService } from './core/runs/run-service.js';
import { ContainerSlots } from './core/containers/container-slots.js';
import { RunInputs } from './core/containers/run-inputs.js';
import { SystemStatus } from './core/system-status.js';
import { TokenService } from './core/auth/tokens.js';
import { AuthService } from './core/auth/auth-service.js';
import { createBlacklist } from './store/blacklist/create-blacklist.js';
import { startOfflineModel } from './offline-model/server.js';
import { SqliteJobStore } from './store/jobs/sqlite-job-store.js';
import { JobService } from './core/jobs/job-service.js';
import { WebhookDeliverer } from './core/webhooks/deliverer.js';
import { DestinationPolicy } from './core/webhooks/destination-policy.js';
import { registerJobRoutes } from './http/routes/jobs.js';
import { JobEvents } from './core/jobs/job-events.js';
import { registerStreamRoutes } from './http/routes/stream.js';
import { AgentService } from './core/agents/agent-service.js';
import { registerAgentRoutes } from './http/routes/agents.js';
import { ImageCatalog } from './core/images/image-catalog.js';
import { ImageProbe } from './core/images/image-probe.js';
import { registerImageRoutes } from './http/routes/images.js';
import { SqliteWorkspaceStore } from './store/workspaces/sqlite-workspace-store.js';
import { SqliteUsageStore } from './store/usage/sqlite-usage-store.js';
import { Budgets } from './core/gateway/budgets.js';
import { ClientSubnets } from './gateway/client-subnets.js';
import { startGateway } from './gateway/gateway-server.js';
import { UsageReport } from './core/gateway/usage-report.js';
import { registerUsageRoutes } from './http/routes/usage.js';
import { TREE_DIR, VIEW_SUFFIX, WorkspaceDisks, workspaceInodes } from './runtime/workspace-disks.js';
import { WORKSPACES_NEED_ROOT, WorkspaceService } from './core/workspaces/workspace-service.js';
import { registerWorkspaceRoutes } from './http/routes/workspaces.js';
import { registerWorkspaceArchiveRoutes } from './http/routes/workspace-archive.js';
import { RunWorkspaces } from './core/runs/run-workspace.js';
import { GitCloner } from './core/workspaces/git-clone.js';
import { secretsPolicy } from './core/validation/secrets-env.js';
import { loopWorkdirBinder } from './runtime/workdir-binds.js';
import { SpareWorkspaceDisks } from './runtime/spare-workspace-disks.js';

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
  readonly usage: SqliteUsageStore;
  /** Resolves once every run answered before its end (at its result) has also ended: container removed, transcript kept. */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** The gateway's upstream while no model is configured: runs are refused (503) before any container, so nothing calls it. */
const UNCONFIGURED_UPSTREAM = { baseUrl: 'http://127.0.0.1:9', credential: { kind: 'api_key', value: '' } } as const;

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
  // Stopping happens in two parts. First, in this order: runs in flight are cancelled (their containers
  // removed while Podman is still there), persistent agents are stopped (their event streams end only
  // then), the API listener closes. Then every other resource, in reverse order of creation.
  const stopFirst: (() => Promise<void>)[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const cleanup of [...stopFirst.splice(0), ...cleanups.splice(0).reverse()]) {
      const started = Date.now();
      await cleanup().catch((error: unknown) => logger.error({ err: error }, 'cleanup step failed'));
      logger.debug({ step: cleanup.name || cleanup.toString().slice(0, 60), durationMs: Date.now() - started }, 'stopped');
    }
  };
  try {
    const stopTracing = startTracing({ endpoint: config.tracing.endpoint, sampleRatio: config.tracing.sampleRatio, serviceVersion: config.version, instance: config.instanceName, log: logger });
    // Last of all: spans of the shutdown itself are still exported.
    cleanups.unshift(stopTracing);
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });

    let podmanService: PodmanService | undefined;
    let socketPath = config.podmanSocket;
    if (!socketPath) {
      podmanService = await startPodmanService(join(config.dataDir, 'podman'), (m) => logger.info(m));
      cleanups.push(() => podmanService!.stop());
      socketPath = podmanService.socketPath;
    }
    const client = new PodmanClient(socketPath);
    cleanups.push(() => client.close());
    const podman = new PodmanRuntime(client, (details, message) => logger.warn(details, message), config.agent.logMaxBytes, config.agent.image);
    // Core services get the runtime whose unreachable-Podman errors are already Berth's 503.
    const runtime = withTranslatedErrors(podman);
    await runtime.ping();
    // The agent network: rootful, no route out (the gateway's port is its one way out, closed to the rest of
    // the host by the network isolation below); rootless, Podman's own route out. Removed at stop when Berth
    // made it and no container (a job, an agent) still uses it.
    const agentNetwork = await runtime.ensureAgentNetwork(config.agent.network, { [INSTANCE_LABEL]: config.instanceName }, { internal: rootful });
    if (agentNetwork.createdByBerth) {
      cleanups.push(async () => {
        if (!(await podman.releaseAgentNetwork(agentNetwork.name))) logger.info({ network: agentNetwork.name }, 'the agent network is still used by containers that outlive this process: kept');
      });
    }
    if (!rootful) {
      logger.warn('rootless Podman: egress is not enforced (engine containers have a route out; only container.network mode "open" is accepted), and networks are not isolated between callers (stack networks have no route out, but engine containers can reach each other and other callers\' stacks; docs/egress.md, docs/compose.md)');
    }
    // Async jobs a previous process left running keep their containers and directories: they are followed
    // again (JobService.start). Everything else that process left is removed.
    const jobStore = new SqliteJobStore(join(config.dataDir, 'jobs.db'));
    cleanups.push(() => jobStore.close());
    const agentStore = new SqliteAgentStore(join(config.dataDir, 'agents.db'));
    cleanups.push(async () => agentStore.close());
    // The replayable event log (store/events, docs/agents.md): closed after the agents and jobs that write it
    // (cleanups run in reverse); pruned to SERVICE_EVENTS_MAX_AGE every minute at most.
    const eventLog = new SqliteEventLog(join(config.dataDir, 'events.db'), config.events);
    cleanups.push(() => eventLog.close());
    const pruneEvents = () => void eventLog.prune(Date.now()).catch((error: unknown) => logger.warn({ err: error }, 'pruning the event log failed; the next pass retries'));
    pruneEvents();
    const eventPruner = setInterval(pruneEvents, Math.max(1_000, Math.min(60_000, config.events.maxAgeMs)));
    eventPruner.unref();
    cleanups.push(async () => clearInterval(eventPruner));
    // What the model gateway records (store/usage/): budgets are counted from it, GET /usage reads it. Closed
    // after the gateway (cleanups run in reverse), so no record of a request in flight is lost.
    const usageStore = new SqliteUsageStore(join(config.dataDir, 'usage.db'));
    cleanups.push(async () => usageStore.close());
    // Agents a previous process left are followed again too (AgentService.restore): their containers, run
    // directories (by run id) and input directories (by the id their container is labelled with) stay.
    const liveRuns = new Set([
      ...(await jobStore.withStatus('running')).map((job) => job.runId),
      ...agentStore.live().flatMap((agent) => [agent.runId, agent.inputsId]),
    ]);
    await reapLeftovers(runtime, config.instanceName, logger, liveRuns);
    // Builds a killed process left: their processes, disks (SERVICE_COMPOSE_BUILD_DISK) and sandboxes.
    const leftoverBuilds = await removeLeftoverBuilds(config.instanceName);
    if (leftoverBuilds.length > 0) logger.warn({ sandboxes: leftoverBuilds }, 'removed the sandboxes of builds a previous process left');
    // Also at a stop after a failed start (stopWork may not have run).
    cleanups.push(() => stopBuilds(config.instanceName));

    // Every run writes only to a file system of its own container.disk size (runtime/run-disk.ts, docs/disk.md).
    const noDisks = await LoopDisks.unavailable();
    if (noDisks !== undefined) logger.warn({ reason: noDisks }, 'container.disk is not enforced: runs, compose stacks and builds write to the host\'s disk without a limit (SERVICE_COMPOSE_STACK_DISK and SERVICE_COMPOSE_BUILD_DISK neither)');
    const sessions = new SessionStore(config.agent.sessionsDir, config.agent.sessionsHostDir, {
      transcriptLimitBytes: config.sessions.maxBytes,
      ...(noDisks === undefined ? { disks: new LoopDisks() } : {}),
      onCarryRefused: (sessionId, reasons) =>
        logger.warn({ sessionId, reasons }, 'transcripts a run left were not kept in its session (links, not regular files, or over SERVICE_SESSIONS_MAX_BYTES)'),
    });
    await sessions.init(liveRuns);
    // Last of all (cleanups run in reverse): the run disks' shared parent, once no disk is left below it.
    if (noDisks === undefined) cleanups.push(() => unshareMountsBelow(join(sessions.dir, '.runs')));

    // Workspaces: one file system each (runtime/workspace-disks.ts), indexed in workspaces.db; the index and
    // the disks are reconciled before anything uses them, and unused ones are swept every minute.
    const workspaceStore = new SqliteWorkspaceStore(join(config.dataDir, 'workspaces.db'));
    cleanups.push(async () => workspaceStore.close());
    const fileOwner = { uid: config.agent.usernsBase + config.workspaces.fileOwnerUid, gid: config.agent.usernsBase + config.workspaces.fileOwnerUid };
    const workspaceDisks =
      noDisks === undefined
        ? new WorkspaceDisks(new LoopDisks(), {
            dir: join(config.agent.sessionsDir, '.workspaces'),
            bytes: config.workspaces.maxBytes,
            inodes: workspaceInodes(config.workspaces.maxBytes, config.workspaces.maxFiles),
            treeOwner: fileOwner,
            log: (details, message) => logger.warn(details, message),
          })
        : undefined;
    await workspaceDisks?.init();
    // After every run and agent has ended (cleanups run after stopFirst): what no lease holds is unmounted.
    if (workspaceDisks) cleanups.push(() => workspaceDisks.close());
    // Blank disks made ahead for new sessions' own workspaces, one per pooled engine (spare-workspace-disks.ts).
    const spareDisks = workspaceDisks ? new SpareWorkspaceDisks(workspaceDisks, config.pool.size + config.pool.agentSize, (details, message) => logger.warn(details, message)) : undefined;
    if (spareDisks) cleanups.push(() => spareDisks.close());
    const workspaces = new WorkspaceService({
      store: workspaceStore,
      disks: spareDisks,
      unavailableReason: noDisks === undefined ? WORKSPACES_NEED_ROOT : `${WORKSPACES_NEED_ROOT}: ${noDisks}`,
      settings: { ...config.workspaces, fileOwner },
      log: (details, message) => logger.warn(details, message),
    });
    await workspaces.init();
    spareDisks?.start();
    if (workspaceDisks) {
      const sweeper = setInterval(() => void workspaces.sweep(Date.now()).catch((error: unknown) => logger.error({ err: error }, 'workspace sweep failed')), Math.max(1_000, Math.min(60_000, config.workspaces.ttlMs)));
      sweeper.unref();
      cleanups.push(async () => clearInterval(sweeper));
    }

    const agentNetworkGateway = agentNetwork.gateways[0];
    const engineAccess = new EngineAccess(config, runtime, async ({ host, apiKey }) =>
      startOfflineModel({
        host,
        port: config.engine.offlineModelPort,
        apiKey,
        log: (message) => logger.debug({ component: 'offline-model' }, message),
      }),
    );
    cleanups.push(() => engineAccess.close());
    const access = await engineAccess.init();
    logger.info({ mode: access.mode }, access.message);
    // Per-run credentials for the model gateway (core/gateway/run-grants.ts): those of runs that outlive a
    // restart (jobs still running, live agents) are kept; every other one is revoked.
    const grantStore = new SqliteGrantStore(join(config.dataDir, 'grants.db'));
    cleanups.push(async () => grantStore.close());
    const grants = new RunGrants(grantStore, { log: (details, message) => logger.warn(details, message) });
    // Stacks outlive the process too: their services' credential is kept for the adoption (Stacks.init).
    const stackGrants = (await runtime.listNetworks(`${STACK_INSTANCE_LABEL}=${config.instanceName}`)).flatMap((network) => {
      const sessionId = network.labels[STACK_LABEL];
      return sessionId === undefined ? [] : [stackGrantId(sessionId)];
    });
    const staleGrants = grants.retainOnly([...liveRuns, ...stackGrants]);
    if (staleGrants > 0) logger.info({ revoked: staleGrants }, 'revoked the credentials of runs the previous process left');
    // A stop that leaves jobs and agents running keeps their credentials for the next start (first of all).
    if (config.shutdown.mode === 'detach') stopFirst.unshift(async () => grants.detach());

    const metrics = createMetrics();
    const metricsServer = await startMetricsServer(metrics, config.metricsAddress);
    cleanups.push(() => metricsServer.close());

    // The model gateway and egress proxy (src/gateway/, docs/egress.md): the one way out of engine
    // containers. It listens on every address (the agent bridge has its address only once a container is on
    // it) and admits only the agent network's subnets (rootful; rootless connections arrive through Podman's
    // port forwarder). Closed after every run ended (cleanups run after stopFirst), before the usage store.
    const budgets = new Budgets(config.budgets, usageStore);
    const configured = access.mode === 'not-configured' ? UNCONFIGURED_UPSTREAM : access.upstream;
    // Read on every model request: a rotated credential secret is used from the next request on (engines
    // hold none, so nothing else has to change).
    let credential = configured.credential;
    const upstream = { baseUrl: configured.baseUrl, get credential() { return credential; } };
    if (access.mode === 'credentials-secret') {
      // A rotation replaces the secret (podman secret rm + create): a new id, looked up every 5 s (one
      // inspect); the value is read again only then (runtime.readSecret starts a container).
      const name = config.engine.credentialsSecret;
      let knownId = await runtime.secretId(name);
      let checking = false;
      const watch = setInterval(() => {
        if (checking) return;
        checking = true;
        void (async () => {
          const id = await runtime.secretId(name);
          if (id === undefined || id === knownId) return;
          const value = (await runtime.readSecret(name)).trim();
          if (value === '') return logger.warn({ secret: name }, 'the engine credential secret was replaced by an empty one: the previous credential stays in use');
          knownId = id;
          credential = { kind: credential.kind, value };
          logger.info({ secret: name }, 'the engine credential secret was replaced: the model gateway uses the new one');
        })()
          .catch((error: unknown) => logger.warn({ err: error, secret: name }, 'the engine credential secret could not be read again'))
          .finally(() => (checking = false));
      }, 5_000);
      watch.unref();
      cleanups.push(async () => clearInterval(watch));
    }
    // Agent containers connect from the agent network's subnets, stack services from their stack's (admitted
    // while the stack exists).
    const gatewayClients = new ClientSubnets(agentNetwork.subnets);
    const gateway = await startGateway({
      host: '0.0.0.0',
      port: config.gateway.port,
      ...(rootful ? { allowedClients: gatewayClients } : {}),
      upstream,
      grants,
      budgets,
      usage: budgets.recorder(usageStore),
      onBudgetRefusal: (runId, message) => grants.noteRefusal(runId, message),
      metrics,
      ...(hooks.egressResolveOverride ? { resolveOverride: hooks.egressResolveOverride } : {}),
      log: (details, message) => logger.info({ component: 'gateway', ...details }, message),
    });
    cleanups.push(() => gateway.close());
    // Where engine containers reach it: the agent network's gateway address (rootful), else the name
    // rootless Podman gives the host.
    const gatewayHost = rootful && agentNetworkGateway !== undefined ? agentNetworkGateway : HOST_FROM_CONTAINER;
    const gatewayUrl = `http://${gatewayHost}:${gateway.port}`;
    // Callers' networks are kept apart on the host, and the agent network reaches only the gateway's port,
    // before any stack is adopted or container started. Rootless Podman keeps its bridges in its own
    // network namespace, out of the host's nftables.
    if (rootful) {
      const byInstance = `${STACK_INSTANCE_LABEL}=${config.instanceName}`;
      const uninstall = await podman.isolateNetworks(new NetworkIsolation(config.instanceName), config.agent.network, byInstance, gateway.port);
      cleanups.push(async () => {
        // Containers that outlive the stop (async jobs, agents) stay held to the rules until the next start replaces them.
        const remaining = await runtime.listContainers(`${INSTANCE_LABEL}=${config.instanceName}`).catch(() => []);
        if (remaining.length === 0) await uninstall();
        else logger.info({ containers: remaining.length }, 'network isolation kept for the containers that outlive this process');
      });
    }
    // Grants whose container is gone (a path that ended without revoking, a container removed behind
    // Berth's back) are revoked every 30 s.
    const grantSweep = setInterval(() => {
      runtime
        .listContainers(`${INSTANCE_LABEL}=${config.instanceName}`)
        .then((containers) => {
          // Engines' grants are keyed by their run label, git clones' by their container's name.
          // Engines' grants are keyed by their run label, a stack's by its services' grant label.
          const revoked = grants.sweep(containers.flatMap((c) => [...[RUN_LABEL, GRANT_LABEL].flatMap((label) => c.labels[label] ?? []), ...c.names]));
          if (revoked > 0) logger.info({ revoked }, 'revoked the credentials of runs whose containers are gone');
        })
        .catch((error: unknown) => logger.warn({ err: error }, 'the credential sweep failed'));
    }, 30_000);
    grantSweep.unref();
    cleanups.push(async () => clearInterval(grantSweep));

    const tokens = new TokenService({
      // With authentication off nothing is verified; a random key keeps the service constructible.
      secret: config.auth.enabled ? config.auth.jwtSecret : randomBytes(32).toString('hex'),
      accessTtlMs: config.auth.accessTtlMs,
      refreshTtlMs: config.auth.refreshTtlMs,
    });
    const blacklist = createBlacklist(config.auth, { onCleanupError: (error) => logger.warn({ err: error }, 'blacklist cleanup failed') });
    cleanups.push(() => blacklist.close());
    if (!config.auth.enabled) logger.warn('authentication is disabled (SERVICE_AUTH_ENABLED=false): anyone who reaches the API can run agents');
    if (config.agent.allowAllVolumes) logger.warn('SERVICE_AGENT_ALLOW_ALL_VOLUMES=true: requests may mount any host path');
    if (config.webhooks.signingSecret === '') logger.warn('SERVICE_WEBHOOK_SIGNING_SECRET is empty: webhooks are sent unsigned');

    const engineTree = await prepareEngineImage(
      runtime,
      {
        image: config.agent.engineImage,
        mount: config.agent.mountEngine,
        autoPull: config.agent.autoPullEngine,
        insecureRegistries: config.images.insecureRegistries,
        instance: config.instanceName,
      },
      logger,
    );
    // Released after every run and agent has ended (cleanups run after stopFirst, in reverse order).
    if (engineTree) cleanups.push(() => engineTree.release());

    const shutdown = new AbortController();
    const inputs = new RunInputs(config.agent.sessionsDir, config.agent.sessionsHostDir);
    await inputs.init(liveRuns);
    const containerSettings = {
      engineAccess,
      gateway: { url: gatewayUrl, grants },
      engineTree: engineTree?.path,
      instanceId: config.instanceName,
      pidsLimit: config.agent.pidsLimit,
      network: config.agent.network,
      agentNetworkGateway,
      // Rootful Podman maps container ids into SERVICE_AGENT_USERNS_BASE…; rootless Podman already does.
      userNamespace:
        rootful
          ? { kind: 'mapped' as const, hostBase: config.agent.usernsBase, size: USERNS_SIZE }
          : { kind: 'rootless' as const },
      workdirAutoCreate: config.agent.workdirAutoCreate,
      inputs,
    };
    // Caller volumes are mounted from staging mounts of exactly the checked objects (runtime/volume-staging.ts).
    const volumeStaging = new VolumeStaging({
      dir: join(config.agent.sessionsDir, '.volumes'),
      hostDir: join(config.agent.sessionsHostDir, '.volumes'),
    });
    await volumeStaging.init();
    // Compose stacks belong to sessions: adopted at start, left running at stop (docs/compose.md).
    const slots = new ContainerSlots({ total: config.maxContainers, perCaller: config.maxContainersPerCaller });
    // Everything a stack's services write is on the stack's disk (runtime/stack-disk.ts, docs/disk.md).
    const stackDisks = noDisks === undefined ? new StackDisks(join(config.agent.sessionsDir, '.stacks'), new LoopDisks(), config.compose.stackDiskBytes) : undefined;
    await stackDisks?.init();
    const stacks = new Stacks({
      runtime,
      staging: volumeStaging,
      slots,
      // Rootless stack networks live in Podman's own network namespace: the gateway is not reachable there.
      ...(rootful ? { egress: { grants, port: gateway.port, clients: gatewayClients } } : {}),
      ...(stackDisks ? { disks: stackDisks } : {}),
      settings: {
        instanceName: config.instanceName,
        userNamespace: containerSettings.userNamespace,
        pidsLimit: config.agent.pidsLimit,
        defaultMemoryBytes: config.agent.defaultMemoryBytes,
        defaultCpus: config.agent.defaultCpus,
        ttlMs: config.compose.stackTtlMs,
        maxStacks: config.compose.maxStacks,
        maxStacksPerCaller: config.compose.maxStacksPerCaller,
        removeBuiltImages: config.compose.removeBuiltImages,
        maxContextBytes: config.compose.maxContextBytes,
        buildUser: config.compose.buildUser,
        buildMemoryBytes: config.agent.maxMemoryBytes,
        buildCpus: config.agent.maxCpus,
        // Rootful builds run in a sandbox on a disk of this size (runtime/podman/rootless-build.ts).
        ...(noDisks === undefined ? { buildDiskBytes: config.compose.buildDiskBytes } : {}),
        imagePolicy: { allowedPatterns: config.agent.allowedImagePatterns, defaultImage: config.agent.image },
      },
      log: logger,
      onCountChanged: (count) => metrics.composeStacks.set(count),
    });
    await stacks.init((sessionId) => sessions.exists(sessionId));
    cleanups.push(async () => stacks.stop());
    const webhookDestinations = new DestinationPolicy(config.webhooks.allowedHosts);
    const executor = new RunExecutor({ ...containerSettings, runtime, volumeStaging, log: logger });
    // One probe of an image's files answers both GET /images and the check before every run.
    const imageProbe = new ImageProbe(runtime);
    const images = new ImageCheck(runtime, config.agent.mountEngine ? 'mounted' : 'in-image', imageProbe);
    // Pre-started engines for runs and for agents like the default request; removed at stop before the runs drain.
    const template = await validateRunRequest({ prompt: 'pooled engine' }, { config, secretExists: async () => true });
    const enginePool = (kind: PoolKind, size: number) => {
      // The pool's series start at zero, like the other small label sets (metrics.ts): a scrape shows each
      // pool and miss reason from the start, so an absent series means a renamed metric, not "none yet".
      metrics.poolReady.set({ pool: kind }, 0);
      metrics.poolHits.inc({ pool: kind }, 0);
      for (const reason of MISS_REASONS) metrics.poolMisses.inc({ pool: kind, reason }, 0);
      return new EnginePool({
        kind,
        settings: { size, maxAgeMs: config.pool.maxAgeMs, refillPauseMs: config.pool.refillPauseMs },
        runtime,
        sessions,
        container: containerSettings,
        slots,
        template,
        engineBinary: () => images.engineBinary(config.agent.image),
        cpu: hostCpu,
        log: logger,
        observer: {
          size: (ready) => metrics.poolReady.set({ pool: kind }, ready),
          hit: (ms) => {
            metrics.poolHits.inc({ pool: kind });
            metrics.poolClaim.observe({ pool: kind }, ms / 1000);
          },
          miss: (reason) => metrics.poolMisses.inc({ pool: kind, reason }),
          refilled: (ms) => metrics.poolRefill.observe({ pool: kind }, ms / 1000),
        },
      });
    };
    const pools = new EnginePools(enginePool('run', config.pool.size), enginePool('agent', config.pool.agentSize));
    const runs = new RunService({
      config,
      runtime,
      sessions,
      images,
      executor,
      engineAccess,
      grants,
      // A caller whose daily model budget is spent is refused before anything of a run exists.
      budgets,
      slots,
      pool: pools.run,
      agentPool: pools.agent,
      webhookDestinations,
      log: logger,
      shutdownSignal: shutdown.signal,
      stacks,
      // A workspace at each run's workdir: named, the session's own, or a fork's copy (core/runs/run-workspace.ts).
      workspaces: new RunWorkspaces({ workspaces, binder: loopWorkdirBinder, sessionExists: (id) => sessions.exists(id), log: logger }),
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
    // Async jobs: jobs a previous process left unfinished are followed again or reconciled before the API
    // listens. At stop this runs after the runs were cancelled, to record their ends.
    const deliverer = new WebhookDeliverer(config.webhooks, {
      userAgent: `Berth/${config.version}`,
      observer: { attempt: (outcome) => metrics.webhookDeliveries.inc({ outcome }) },
      destinations: webhookDestinations,
    });
    cleanups.push(() => deliverer.close());
    // Every status a job's record takes is also a replayable event of the job (core/jobs/job-events.ts).
    const jobEvents = new JobEvents(eventLog, (error, jobId) => logger.error({ err: error, jobId }, 'a job event could not be kept in the event log; it is sent live without an id'));
    const jobs = new JobService({
      store: jobEvents.recording(jobStore),
      events: jobEvents,
      runs,
      webhooks: deliverer,
      maxConcurrentRuns: config.maxConcurrentRuns,
      retentionMs: config.jobs.retentionMs,
      log: logger,
      shutdownSignal: shutdown.signal,
      observer: { jobCounts: (counts) => Object.entries(counts).forEach(([status, n]) => metrics.jobs.set({ status }, n)) },
    });
    cleanups.push(() => jobs.close());
    await jobs.start();

    // Read when the stop comes: undefined if the start failed before the agents existed.
    let agents: AgentService | undefined;
    stopFirst.push(() =>
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

    // Persistent agents: one container each, stopped (and removed) at shutdown before the listener closes.
    agents = new AgentService({
      runs,
      budgets,
      // An agent followed again after a restart holds its workspace again (RunService.reclaimSession).
      sessions: { hide: (id) => sessions.hide(id), reclaim: (run) => runs.reclaimSession(run, 'agent') },
      store: agentStore,
      events: eventLog,
      slots,
      container: { ...containerSettings, runtime, log: logger },
      defaultIdleTimeoutSeconds: config.agents.defaultIdleTimeoutSeconds,
      idleTickMs: config.agents.idleTickMs,
      exitedRetentionMs: config.agents.exitedRetentionMs,
      sendTimeoutMs: config.agents.sendTimeoutMs,
      maxPromptBytes: config.maxPromptBytes,
      maxSubscribers: config.agents.maxSubscribers,
      log: logger,
      observer: { statusCounts: (counts) => Object.entries(counts).forEach(([status, n]) => metrics.agents.set({ status }, n)) },
    });

    await agents.restore();

    const streams = new StreamLimit(config.sse.maxStreams);
    const sse: SseOptions = {
      heartbeatMs: config.sse.heartbeatMs,
      subscribers: metrics.sseSubscribers,
      maxBufferedBytes: config.sse.maxBufferedBytes,
      admit: () => streams.admit(),
    };
    // git clones into new workspaces, each in a container of its own (core/workspaces/git-clone.ts); ended
    // at the stop before the listener closes, so a clone in flight does not hold the stop up.
    const cloner = workspaceDisks
      ? new GitCloner({
          runtime,
          slots,
          settings: {
            image: config.agent.image,
            instanceId: config.instanceName,
            network: config.agent.network,
            userNamespace: containerSettings.userNamespace,
            fileOwnerUid: config.workspaces.fileOwnerUid,
            timeoutMs: config.workspaces.cloneTimeoutMs,
            memoryBytes: config.agent.defaultMemoryBytes,
            cpus: config.agent.defaultCpus,
            pidsLimit: config.agent.pidsLimit,
            secrets: secretsPolicy(config.engine),
            allowedHosts: config.egress.allowedHosts,
          },
          gateway: { url: gatewayUrl, grants },
          // The disk mount's tree beside its view (runtime/workspace-disks.ts), as a run's workdir gets it.
          treeHostPath: (ws) => join(ws.view.slice(0, -VIEW_SUFFIX.length), TREE_DIR),
          checkpointUpload: (ws) => workspaces.checkpointUpload(ws),
          log: logger,
        })
      : undefined;
    if (cloner) stopFirst.push(() => cloner.stop());
    const app = await buildApp({
      config,
      logger,
      metrics,
      runs,
      status: new SystemStatus(config, runtime, engineAccess),
      version: versionInfo({ engineImage: config.agent.engineImage, agentImage: config.agent.image }, await checkoutCommit(join(import.meta.dirname, '..'))),
      auth: new AuthService({ tokens, blacklist, apiTokens: config.auth.apiTokens, log: logger }),
      extraRoutes: [
        (app) => registerJobRoutes(app, { jobs, sse }),
        (app) => registerUsageRoutes(app, { usage: new UsageReport(usageStore, config.budgets) }),
        (app) => registerWorkspaceRoutes(app, { workspaces, ...(cloner ? { cloner } : {}) }),
        (app) => registerWorkspaceArchiveRoutes(app, { workspaces, settings: config.workspaces }),
        (app) => registerStreamRoutes(app, { runs, sse }),
        (app) => registerAgentRoutes(app, { agents, sse }),
        (app) => registerSessionRoutes(app, { sessions: new SessionService({
              store: sessions,
              maxPageSize: config.sessions.maxPageSize,
              teardown: async (sessionId) => {
                await stacks.remove(sessionId);
                // The session's own workspace goes with it; a caller's workspace is only unlinked.
                await workspaces.removeForSession(sessionId);
              },
              stackOf: (sessionId) => stacks.view(sessionId),
            }) }),
        (app) =>
          registerImageRoutes(app, {
            images: new ImageCatalog({
              runtime,
              probe: imageProbe,
              policy: {
                allowedPatterns: config.agent.allowedImagePatterns,
                defaultImage: config.agent.image,
                insecureRegistries: config.images.insecureRegistries,
              },
            }),
            sse,
          }),
      ],
    });
    stopFirst.push(async () => {
      const closing = app.close();
      // Detached: requests still open (a sync run, streams) are cut; their work goes on without them. In the
      // other modes their work has ended by now and their answers are let out.
      if (config.shutdown.mode === 'detach') app.server.closeAllConnections();
      // An answer let out during the close (a git clone the stop ended) leaves its keep-alive connection idle
      // after Fastify closed the idle ones: it would hold the close for Fastify's keepAliveTimeout (72 s).
      const idle = setInterval(() => app.server.closeIdleConnections(), 100);
      try {
        await closing;
      } finally {
        clearInterval(idle);
      }
    });
    await app.listen({ host: config.address.host, port: config.address.port });
    const bound = app.server.address();
    const port = typeof bound === 'object' && bound ? bound.port : config.address.port;
    const url = `http://${config.address.host.includes(':') ? `[${config.address.host}]` : config.address.host}:${port}`;
    logger.info({ url, metrics: `http://${config.metricsAddress.host}:${metricsServer.port}/metrics` }, 'berth is listening');

    return {
      app,
      url,
      metricsUrl: `http://${config.metricsAddress.host}:${metricsServer.port}/metrics`,
      runtime: podman,
      engineAccess,
      pools,
      workspaces,
      gateway: { url: gatewayUrl, port: gateway.port },
      grants,
      usage: usageStore,
      settled: () => sessions.settled(),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
