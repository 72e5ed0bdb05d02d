// What every engine container is made from, whichever use it has (a run, a pooled engine, an agent): the
// engine image's files, the settings they share, caller volumes' staging, the container slots, the
// sessions' compose stacks, the executor that runs one, and the check of an image before it does.
import { join } from 'node:path';
import type { Logger } from 'pino';
import { USERNS_SIZE, type Config } from '../config.js';
import { Stacks } from '../core/compose/stacks.js';
import { ClusterSlots } from '../core/cluster/slots.js';
import { ContainerSlots } from '../core/containers/container-slots.js';
import type { EngineContainerSettings } from '../core/containers/engine-container.js';
import { RunInputs } from '../core/containers/run-inputs.js';
import type { EngineAccess } from '../core/engine-access.js';
import type { RunGrants } from '../core/gateway/run-grants.js';
import { ImageProbe } from '../core/images/image-probe.js';
import { prepareEngineImage } from '../core/runs/engine-image.js';
import { ImageCheck } from '../core/runs/image-check.js';
import { RunExecutor } from '../core/runs/run-executor.js';
import type { SessionStore } from '../core/sessions/session-store.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import { LoopDisks } from '../runtime/run-disk.js';
import { StackDisks } from '../runtime/stack-disk.js';
import { VolumeStaging } from '../runtime/volume-staging.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import { PostgresSlotStore } from '../store/slots/postgres-slot-store.js';
import type { BuiltGateway } from './gateway.js';
import type { AgentNetwork } from './runtime.js';
import type { Teardown } from './teardown.js';

export interface EngineContainerInputs {
  readonly config: Config;
  readonly rootful: boolean;
  readonly runtime: ContainerRuntime;
  readonly agentNetwork: AgentNetwork;
  /** Runs a previous process left that are followed again: their input directories stay. */
  readonly liveRuns: ReadonlySet<string>;
  /** Why runs cannot have file systems of their own on this host; undefined: they can (composition/storage.ts). */
  readonly noDisks: string | undefined;
  readonly sessions: SessionStore;
  readonly engineAccess: EngineAccess;
  readonly grants: RunGrants;
  readonly gateway: Pick<BuiltGateway, 'url' | 'port' | 'clients'>;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly teardown: Teardown;
  /** The shared database (SERVICE_DATABASE_URL): per-caller limits are then counted across its nodes. */
  readonly database?: PostgresDatabase;
}

export interface EngineContainers {
  readonly settings: EngineContainerSettings;
  readonly volumeStaging: VolumeStaging;
  /** Places under SERVICE_MAX_CONTAINERS(_PER_CALLER), shared by runs, agents, the pool, stacks and clones. */
  readonly slots: ContainerSlots;
  readonly stacks: Stacks;
  readonly executor: RunExecutor;
  /** One probe of an image's files answers both GET /images and the check before every run. */
  readonly imageProbe: ImageProbe;
  readonly images: ImageCheck;
}

export async function buildEngineContainers(inputs: EngineContainerInputs): Promise<EngineContainers> {
  const { config, rootful, runtime, noDisks, grants, gateway, metrics, logger, teardown } = inputs;
  if (config.agent.allowAllVolumes) logger.warn('SERVICE_AGENT_ALLOW_ALL_VOLUMES=true: requests may mount any host path');
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
  // Released after every run and agent has ended (resources are released after the work, in reverse order).
  if (engineTree) teardown.release(() => engineTree.release());

  const runInputs = new RunInputs(config.agent.sessionsDir, config.agent.sessionsHostDir);
  await runInputs.init(inputs.liveRuns);
  const settings: EngineContainerSettings = {
    engineAccess: inputs.engineAccess,
    gateway: { url: gateway.url, grants },
    engineTree: engineTree?.path,
    instanceId: config.instanceName,
    pidsLimit: config.agent.pidsLimit,
    network: config.agent.network,
    agentNetworkGateway: inputs.agentNetwork.gateways[0],
    // Rootful Podman maps container ids into SERVICE_AGENT_USERNS_BASE…; rootless Podman already does.
    userNamespace:
      rootful
        ? { kind: 'mapped' as const, hostBase: config.agent.usernsBase, size: USERNS_SIZE }
        : { kind: 'rootless' as const },
    workdirAutoCreate: config.agent.workdirAutoCreate,
    inputs: runInputs,
  };
  // Caller volumes are mounted from staging mounts of exactly the checked objects (runtime/volume-staging.ts).
  const volumeStaging = new VolumeStaging({
    dir: join(config.agent.sessionsDir, '.volumes'),
    hostDir: join(config.agent.sessionsHostDir, '.volumes'),
  });
  await volumeStaging.init();
  const ledger = inputs.database ? await clusterLedger(inputs.database, config.cluster.nodeName, logger, teardown) : undefined;
  const slots = new ContainerSlots({ total: config.maxContainers, perCaller: config.maxContainersPerCaller }, ledger);
  // Compose stacks belong to sessions: adopted at start, left running at stop (docs/compose.md). Everything
  // a stack's services write is on the stack's disk (runtime/stack-disk.ts, docs/disk.md).
  const stackDisks = noDisks === undefined ? new StackDisks(join(config.agent.sessionsDir, '.stacks'), new LoopDisks(), config.compose.stackDiskBytes) : undefined;
  await stackDisks?.init();
  const stacks = new Stacks({
    runtime,
    staging: volumeStaging,
    slots,
    ...(ledger ? { ledger } : {}),
    // Rootless stack networks live in Podman's own network namespace: the gateway is not reachable there.
    ...(rootful ? { egress: { grants, port: gateway.port, clients: gateway.clients } } : {}),
    ...(stackDisks ? { disks: stackDisks } : {}),
    settings: {
      instanceName: config.instanceName,
      userNamespace: settings.userNamespace,
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
  await stacks.init((sessionId) => inputs.sessions.exists(sessionId));
  teardown.release(async () => stacks.stop());
  const executor = new RunExecutor({ ...settings, runtime, volumeStaging, log: logger });
  const imageProbe = new ImageProbe(runtime);
  const images = new ImageCheck(runtime, config.agent.mountEngine ? 'mounted' : 'in-image', imageProbe);
  return { settings, volumeStaging, slots, stacks, executor, imageProbe, images };
}

/**
 * The cluster's count of each caller's containers and stacks (core/cluster/slots.ts): what this node left there
 * at its last stop or crash is deleted first (what still runs is counted again as it is followed again), and
 * at the stop, once the work has ended, what it holds is deleted (released after every run, agent and stack).
 */
async function clusterLedger(database: PostgresDatabase, node: string, logger: Logger, teardown: Teardown): Promise<ClusterSlots> {
  const store = await PostgresSlotStore.open(database, node);
  const ledger = new ClusterSlots(store, logger);
  teardown.release(async () => {
    await ledger.settled();
    await store.clearNode();
    await store.close();
  });
  await ledger.clearLeftovers();
  return ledger;
}
