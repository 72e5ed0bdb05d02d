// Compose stacks: one per session, created by the session's first run with an environment, reused by
// its later runs while the definition is the same, removed with the session, after SERVICE_COMPOSE_STACK_TTL
// unused, or at start when its session is gone. Stacks belong to sessions, not to the process: a stop
// leaves them running and the next start adopts them (their resources carry Berth's labels).
//
// Berth drives libpod itself from the checked definition (no compose tool): every service container is
// created by the runtime adapter with Berth's limits, user namespace and labels, and the engine's own
// container joins the stack's network as the agent service (core/containers/engine-container.ts).
//
// Every service container holds a container slot of the session's owner (SERVICE_MAX_CONTAINERS and
// SERVICE_MAX_CONTAINERS_PER_CALLER), reserved before anything is created and released with the stack.
//
// Everything a stack's services can write is on the stack's own disk (runtime/stack-disk.ts,
// SERVICE_COMPOSE_STACK_DISK): their root file systems are read-only, and their named volumes and their
// /tmp, /var/tmp and /run are volumes whose data lives on that disk. The disk lives as long as the stack.
//
// A stack's network has no route out and no DNS server: services know each other from /etc/hosts (fixed
// addresses, ./service-network.ts) and reach outside only through Berth's egress proxy, with a credential
// of the stack's own that each run binds to its caller and egress policy (docs/egress.md).
import type { Logger } from 'pino';
import type { EgressPolicy } from '../../egress-policy.js';
import { BerthError, errors } from '../../errors.js';
import {
  BuildContextError, BuildTimeoutError, GRANT_LABEL, STACK_BUILD_LABEL, STACK_HASH_LABEL, STACK_INSTANCE_LABEL, STACK_LABEL,
  type Builds, type Containers, type Images, type Networks, type ServiceContainerSpec, type UserNamespace, type VolumeMountSpec, type Volumes,
} from '../../runtime/container-runtime.js';
import type { GatewayClients } from '../gateway/gateway-types.js';
import type { RunGrants } from '../gateway/run-grants.js';
import type { StackDisks } from '../../runtime/stack-disk.js';
import type { VolumeStaging } from '../../runtime/volume-staging.js';
import { formatDuration } from '../../units.js';
import type { EnvironmentPlan } from '../run-plan.js';
import type { ContainerSlots, Slot } from '../containers/container-slots.js';
import type { CallerLedger, ClusterHold } from '../cluster/slots.js';
import type { JoinedStack } from '../containers/engine-container.js';
import type { RunPhases } from '../run-phases.js';
import type { ImagePolicy } from '../validation/images.js';
import type { StackView } from '../sessions/session-service.js';
import { buildContainerfileCheck } from './build-check.js';
import { serviceAddresses, serviceHostEntries, serviceProxyEnvironment, stackGrantId, type HostEntry } from './service-network.js';
import { sessionImageTag, type DependencyCondition, type StackDefinition, type StackService } from '../compose-file/stack-definition.js';

/** The way out of a stack's services: Berth's egress proxy (rootful Podman; rootless stacks have none). */
export interface StackEgress {
  readonly grants: Pick<RunGrants, 'issue' | 'bind' | 'revoke' | 'has'>;
  /** The gateway's port, on every stack network's gateway address. */
  readonly port: number;
  readonly clients: GatewayClients;
}

export interface StacksSettings {
  readonly instanceName: string;
  readonly userNamespace: UserNamespace;
  readonly pidsLimit: number;
  /** Limits of a service that sets none (the agent defaults). */
  readonly defaultMemoryBytes: number;
  readonly defaultCpus: number;
  /** Limits of a build's steps (the agent maximums: a build may need more than a run). */
  readonly buildMemoryBytes: number;
  readonly buildCpus: number;
  readonly ttlMs: number;
  readonly maxStacks: number;
  readonly maxStacksPerCaller: number;
  readonly removeBuiltImages: boolean;
  readonly maxContextBytes: number;
  /** The unprivileged system user whose rootless Podman runs builds (SERVICE_COMPOSE_BUILD_USER). */
  readonly buildUser: string;
  /** The size of a build's own file system (SERVICE_COMPOSE_BUILD_DISK); undefined: the host cannot make one. */
  readonly buildDiskBytes?: number;
  /** The images a build may start from (SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS). */
  readonly imagePolicy: ImagePolicy;
}

export interface StacksDependencies {
  readonly runtime: Containers & Images & Networks & Volumes & Builds;
  readonly staging: VolumeStaging;
  /** Where service containers count (the runs' and agents' slots). */
  readonly slots: ContainerSlots;
  /**
   * With several nodes on one database: the cluster's count of each caller's stacks, so that
   * SERVICE_COMPOSE_MAX_STACKS_PER_CALLER holds across nodes (core/cluster/slots.ts). Absent: counted here.
   */
  readonly ledger?: CallerLedger;
  /** Each stack's disk (SERVICE_COMPOSE_STACK_DISK); undefined when the host cannot make disks (rootless). */
  readonly disks?: StackDisks;
  readonly settings: StacksSettings;
  readonly log: Logger;
  /** Undefined: the services have no way out at all. */
  readonly egress?: StackEgress;
  /** Stack count changes, for /metrics. */
  readonly onCountChanged?: (count: number) => void;
}

/** What the engine container of a run needs from its session's stack: what it joins, and more. */
export interface StackAttachment extends JoinedStack {
  /** The image the stack built for the agent service (this session's own), when it has `build:`. */
  readonly agentImage?: string;
  /** Ends this run's use of the stack (an ephemeral run's stack is then removed). */
  release(): Promise<void>;
}

interface LiveStack {
  readonly sessionId: string;
  /** The session's owner (core/auth/caller.ts), whose limits the service containers count against. */
  readonly owner: string;
  readonly hash: string;
  /** The stack network's IPv4 subnet, where its services' fixed addresses are. */
  readonly subnet: string;
  /** One container slot per service container. */
  readonly slots: readonly Slot[];
  /** The stack's place in the cluster's count of the owner's stacks (with a ledger). */
  readonly hold?: ClusterHold;
  /** Sidecar services (known from the definition, or from the labels of an adopted stack). */
  readonly services: readonly string[];
  users: number;
  lastUsedMs: number;
}

const SERVICE_LABEL = 'berth.stack-service';
/** On a stack's network: the owner of its session (a restart counts adopted stacks against it again). */
const OWNER_LABEL = 'berth.stack-owner';
/** How often a service is polled while waiting for it; healthchecks run at most this often too. */
const POLL_MS = 500;
const LOG_TAIL_LINES = 20;

export function stackNetworkName(sessionId: string): string {
  return `berth-stack-${sessionId}`;
}

function containerName(sessionId: string, service: string): string {
  return `berth-stack-${sessionId}-${service}`;
}

function volumeName(sessionId: string, volume: string): string {
  return `berth-stack-${sessionId}-${volume}`;
}

/** The places of a service's file system it may write besides its volumes, each a volume on the stack's disk. */
const SERVICE_WRITABLE_PLACES = [['/tmp', 'tmp'], ['/var/tmp', 'var-tmp'], ['/run', 'run']] as const;

/** `berth-stackfs-…` never equals a `berth-stack-<session id>-…` name of a compose volume. */
function placeVolumeName(sessionId: string, service: string, place: string): string {
  return `berth-stackfs-${sessionId}-${service}-${place}`;
}

export class Stacks {
  private readonly live = new Map<string, LiveStack>();
  /** Per session: the operation in progress (bring-up, removal), so two never interleave. */
  private readonly locks = new Map<string, Promise<unknown>>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly deps: StacksDependencies) {}

  /**
   * Adopts the stacks this instance left running (their session still exists) and removes the others,
   * then sweeps expired stacks every minute (or every TTL when shorter).
   */
  async init(sessionExists: (sessionId: string) => Promise<boolean>): Promise<void> {
    const { runtime, settings } = this.deps;
    const byInstance = `${STACK_INSTANCE_LABEL}=${settings.instanceName}`;
    // Listed once, grouped by session: the network says a stack was made whole, the containers its services.
    const networks = await runtime.listNetworks(byInstance);
    const containers = await runtime.listContainers(byInstance);
    const volumes = await runtime.listVolumes(byInstance);
    // Built images count only when they go with their stack (an operator who keeps them keeps them).
    const images = settings.removeBuiltImages
      ? (await runtime.listImages()).filter((image) => image.labels[STACK_INSTANCE_LABEL] === settings.instanceName)
      : [];
    const sessions = new Set([...networks, ...containers, ...volumes, ...images].map((resource) => resource.labels[STACK_LABEL] ?? ''));
    for (const sessionId of sessions) {
      const network = networks.find((candidate) => candidate.labels[STACK_LABEL] === sessionId);
      if (sessionId !== '' && network && (await sessionExists(sessionId))) {
        const services = containers
          .filter((container) => container.labels[STACK_LABEL] === sessionId)
          .map((container) => container.labels[SERVICE_LABEL] ?? '')
          .filter(Boolean);
        const owner = network.labels[OWNER_LABEL] ?? '';
        // A stack whose disk is gone (the host restarted) would write to Podman's storage unbounded: not kept.
        const diskKept = this.deps.disks === undefined || (await this.deps.disks.mounted(sessionId));
        const slots = diskKept ? await this.reserve(owner, services.length, false) : undefined;
        if (!diskKept) {
          this.deps.log.warn({ sessionId }, 'removing a compose stack whose disk is no longer mounted (SERVICE_COMPOSE_STACK_DISK)');
        } else if (slots) {
          // Last use before the restart is not known: the TTL counts from now.
          const subnet = network.subnets[0] ?? '';
          // The stack exists whatever the limits say: counted in the cluster when there is room.
          const hold = await this.deps.ledger?.acquire('stack', owner, this.deps.settings.maxStacksPerCaller).catch(() => undefined);
          this.live.set(sessionId, { sessionId, owner, hash: network.labels[STACK_HASH_LABEL] ?? '', subnet, slots, services, users: 0, lastUsedMs: Date.now(), ...(hold ? { hold } : {}) });
          if (subnet !== '') this.deps.egress?.clients.admit(subnet);
          continue;
        }
        this.deps.log.warn({ sessionId, owner }, 'removing a compose stack whose containers no longer fit SERVICE_MAX_CONTAINERS(_PER_CALLER)');
      } else {
        this.deps.log.warn({ sessionId }, 'removing a compose stack whose session is gone (or which was left half-created)');
      }
      await this.removeResources(sessionId);
    }
    // Disks of stacks that no longer exist (a process killed while it made or removed one).
    for (const sessionId of (await this.deps.disks?.sessions()) ?? []) {
      if (!this.live.has(sessionId)) await this.deps.disks!.release(sessionId);
    }
    this.countChanged();
    const every = Math.max(1_000, Math.min(60_000, settings.ttlMs));
    this.sweeper = setInterval(() => void this.sweep().catch((error: unknown) => this.deps.log.error({ err: error }, 'stack sweep failed')), every);
    this.sweeper.unref();
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
  }

  count(): number {
    return this.live.size;
  }

  view(sessionId: string): StackView | undefined {
    const stack = this.live.get(sessionId);
    if (!stack) return undefined;
    return { services: stack.services, in_use: stack.users > 0, last_used_at: new Date(stack.lastUsedMs).toISOString() };
  }

  /**
   * The session's stack, brought up or reused and ready (every service healthy or running) for one run.
   * Failures are 500s naming the service (with the end of its log); nothing of a failed bring-up is left.
   */
  async acquire(
    sessionId: string,
    owner: string,
    plan: EnvironmentPlan,
    phases: RunPhases,
    options: { readonly ephemeral: boolean; /** The run's egress policy, which its services get too. */ readonly egress: EgressPolicy },
  ): Promise<StackAttachment> {
    const { definition } = plan;
    const subnet = await this.exclusive(sessionId, async () => {
      const existing = this.live.get(sessionId);
      if (existing && existing.hash !== definition.hash) {
        this.deps.log.info({ sessionId }, 'the compose definition changed: the session\'s stack is replaced');
        await this.removeNow(sessionId);
      }
      if (this.live.has(sessionId)) {
        await this.reuse(sessionId, owner, plan, phases, options.egress);
      } else {
        const { maxStacks, maxStacksPerCaller } = this.deps.settings;
        const owned = [...this.live.values()].filter((stack) => stack.owner === owner).length;
        if (owned >= maxStacksPerCaller) throw errors.stacksPerCaller(maxStacksPerCaller);
        if (this.live.size >= maxStacks) throw errors.stacksAtCapacity(maxStacks);
        await this.create(sessionId, owner, plan, phases, options.egress);
      }
      const stack = this.live.get(sessionId)!;
      stack.users += 1;
      stack.lastUsedMs = Date.now();
      return stack.subnet;
    });
    const agent = definition.agent;
    let released = false;
    return {
      // No alias: the network has no DNS; services do not resolve the engine (it changes with every run).
      network: { name: stackNetworkName(sessionId), aliases: [] },
      hostEntries: serviceHostEntries(serviceAddresses(subnet, definition.sidecars.map((service) => service.name))),
      volumeMounts: agent.mounts.flatMap((mount) =>
        mount.kind === 'volume' ? [{ volume: volumeName(sessionId, mount.volume), containerPath: mount.containerPath, readOnly: mount.readOnly }] : [],
      ),
      environment: agent.environment,
      ...(agent.image.kind === 'build' ? { agentImage: sessionImageTag(definition, agent.name, sessionId) } : {}),
      release: async () => {
        if (released) return;
        released = true;
        const stack = this.live.get(sessionId);
        if (stack) {
          stack.users -= 1;
          stack.lastUsedMs = Date.now();
        }
        if (options.ephemeral) await this.remove(sessionId);
      },
    };
  }

  /** Removes the session's stack (DELETE /sessions/:id); false when it had none. */
  async remove(sessionId: string): Promise<boolean> {
    return this.exclusive(sessionId, () => this.removeNow(sessionId));
  }

  /** Removes stacks unused for the TTL; answers how many. */
  async sweep(now = Date.now()): Promise<number> {
    let removed = 0;
    for (const stack of [...this.live.values()]) {
      if (stack.users > 0 || now - stack.lastUsedMs < this.deps.settings.ttlMs) continue;
      await this.exclusive(stack.sessionId, async () => {
        const current = this.live.get(stack.sessionId);
        if (!current || current.users > 0 || now - current.lastUsedMs < this.deps.settings.ttlMs) return;
        this.deps.log.info({ sessionId: stack.sessionId, unusedMs: now - current.lastUsedMs }, 'compose stack unused for SERVICE_COMPOSE_STACK_TTL: removed');
        await this.removeNow(stack.sessionId);
        removed += 1;
      });
    }
    await this.removeOrphanImages();
    return removed;
  }

  /**
   * Built images whose stack is gone: one a run's container still used when its stack was removed is
   * removed here, once the container is gone too.
   */
  private async removeOrphanImages(): Promise<void> {
    const { runtime, settings } = this.deps;
    if (!settings.removeBuiltImages) return;
    for (const image of await runtime.listImages()) {
      const sessionId = image.labels[STACK_LABEL];
      if (image.labels[STACK_INSTANCE_LABEL] !== settings.instanceName || sessionId === undefined) continue;
      if (this.live.has(sessionId) || this.locks.has(sessionId)) continue;
      await runtime.removeImage(image.id).catch(() => false);
    }
  }

  private async exclusive<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const before = this.locks.get(sessionId) ?? Promise.resolve();
    const current = before.catch(() => undefined).then(work);
    const settled = current.catch(() => undefined);
    this.locks.set(sessionId, settled);
    try {
      return await current;
    } finally {
      if (this.locks.get(sessionId) === settled) this.locks.delete(sessionId);
    }
  }

  private async create(sessionId: string, owner: string, plan: EnvironmentPlan, phases: RunPhases, egress: EgressPolicy): Promise<void> {
    const { definition } = plan;
    const { runtime } = this.deps;
    const labels = this.labels(sessionId);
    // The service containers' places first: a caller at its limit is refused before anything is built or made.
    // With several nodes, the owner's stacks on every node count (SERVICE_COMPOSE_MAX_STACKS_PER_CALLER).
    const hold = await this.stackPlace(owner);
    let slots: Slot[];
    try {
      slots = (await this.reserve(owner, definition.sidecars.length, true))!;
    } catch (error) {
      hold?.release();
      throw error;
    }
    let registered = false;
    try {
      await phases.measure('compose_build', () => this.buildImages(sessionId, definition, plan.buildTimeoutMs));
      const deadline = Date.now() + plan.healthTimeoutMs;
      await phases.measure('compose_start', async () => {
        const network = await runtime.createNetwork(stackNetworkName(sessionId), { ...labels, [STACK_HASH_LABEL]: definition.hash, [OWNER_LABEL]: owner });
        // Registered before its disk or any container exists: a failure below removes what was made (also
        // after a crash, at start).
        const names = definition.sidecars.map((s) => s.name);
        this.live.set(sessionId, { sessionId, owner, hash: definition.hash, subnet: network.subnet, slots, services: names, users: 0, lastUsedMs: Date.now(), ...(hold ? { hold } : {}) });
        registered = true;
        this.countChanged();
        const addresses = serviceAddresses(network.subnet, names);
        const proxy = this.openEgress(sessionId, owner, network, egress);
        await this.deps.disks?.create(sessionId);
        for (const volume of definition.volumes) await this.createVolume(sessionId, volumeName(sessionId, volume));
        for (const service of definition.sidecars) {
          for (const dependency of service.dependsOn) {
            await this.waitFor(sessionId, definition, dependency.service, dependency.condition, deadline, plan);
          }
          const environment = proxy ? { ...service.environment, ...serviceProxyEnvironment(proxy, names, network.subnet, service.environment) } : service.environment;
          await this.startService(sessionId, definition, service, { address: addresses.get(service.name)!, hosts: serviceHostEntries(addresses), environment });
        }
      });
      await phases.measure('compose_healthy', () => this.waitAllReady(sessionId, definition, deadline, plan));
    } catch (error) {
      if (!registered) {
        for (const slot of slots) slot.release();
        hold?.release();
      }
      await this.removeNow(sessionId).catch((cleanup: unknown) => this.deps.log.error({ err: cleanup, sessionId }, 'removing a failed stack failed'));
      throw error;
    }
  }

  /**
   * The stack's credential for the egress proxy, bound to the run's caller and policy, and its subnet
   * admitted by the gateway; undefined when the services have no way out (rootless, or no service).
   */
  private openEgress(sessionId: string, owner: string, network: { readonly subnet: string; readonly gateway: string }, policy: EgressPolicy): { gateway: string; port: number; token: string } | undefined {
    const { egress } = this.deps;
    if (!egress || this.live.get(sessionId)?.services.length === 0) return undefined;
    const grantId = stackGrantId(sessionId);
    const token = egress.grants.issue(grantId);
    egress.grants.bind(grantId, { kind: 'stack', runId: grantId, caller: owner, sessionId, policy });
    egress.clients.admit(network.subnet);
    return { gateway: network.gateway, port: egress.port, token };
  }

  /** A volume of the stack, its data on the stack's disk when there is one. */
  private async createVolume(sessionId: string, name: string): Promise<void> {
    const backing = this.deps.disks ? await this.deps.disks.volumeDir(sessionId, name) : undefined;
    await this.deps.runtime.createVolume(name, this.labels(sessionId), backing);
  }

  /** The stack's place in the cluster's count of the owner's stacks; refused with the per-caller 429 at the limit. */
  private async stackPlace(owner: string): Promise<ClusterHold | undefined> {
    const { ledger, settings } = this.deps;
    if (!ledger) return undefined;
    const hold = await ledger.acquire('stack', owner, settings.maxStacksPerCaller);
    if (!hold) throw errors.stacksPerCaller(settings.maxStacksPerCaller);
    return hold;
  }

  /**
   * `count` container slots of the owner, all or none: refused with the slots' 429/503 when `strict`,
   * otherwise (a restart adopting stacks) answered as undefined.
   */
  private async reserve(owner: string, count: number, strict: boolean): Promise<Slot[] | undefined> {
    const taken: Slot[] = [];
    try {
      for (let index = 0; index < count; index += 1) taken.push(await this.deps.slots.acquire(owner));
      return taken;
    } catch (error) {
      for (const slot of taken) slot.release();
      if (strict) throw error;
      return undefined;
    }
  }

  /** A live stack for a later run: stopped services are started again; then every service must be ready. */
  private async reuse(sessionId: string, owner: string, plan: EnvironmentPlan, phases: RunPhases, egress: EgressPolicy): Promise<void> {
    const { definition } = plan;
    const deadline = Date.now() + plan.healthTimeoutMs;
    const grantId = stackGrantId(sessionId);
    const { egress: way } = this.deps;
    await phases.measure('compose_healthy', async () => {
      // The services' credential is gone (revoked by a sweep, lost with the grants' store): they could not
      // get out any more; the stack is made again, with a new one.
      if (way && definition.sidecars.length > 0 && !way.grants.has(grantId)) {
        this.deps.log.warn({ sessionId }, 'the compose stack\'s egress credential is gone: the stack is made again');
        await this.removeNow(sessionId);
        await this.create(sessionId, owner, plan, phases, egress);
        return;
      }
      for (const service of definition.sidecars) {
        const state = await this.deps.runtime.inspectContainer(containerName(sessionId, service.name));
        if (!state) {
          // A service container is gone (removed by hand): the stack is made again from scratch.
          await this.removeNow(sessionId);
          await this.create(sessionId, owner, plan, phases, egress);
          return;
        }
        const finishedOneShot = !state.running && state.exit.exitCode === 0 && state.startedAtMs !== undefined;
        if (!state.running && !finishedOneShot) await this.deps.runtime.startContainer(state.id);
      }
      // This run's caller and egress policy hold for the services from now on.
      if (way && definition.sidecars.length > 0) way.grants.bind(grantId, { kind: 'stack', runId: grantId, caller: owner, sessionId, policy: egress });
      await this.waitAllReady(sessionId, definition, deadline, plan);
    });
  }

  /**
   * Builds the stack's images, each tagged for this session only, confined (runtime/podman/image-build.ts);
   * what the Containerfile may ask is checked on the archive that is built (./build-check.ts).
   */
  private async buildImages(sessionId: string, definition: StackDefinition, timeoutMs: number): Promise<void> {
    const { runtime, settings } = this.deps;
    for (const service of [...definition.sidecars, definition.agent]) {
      if (service.image.kind !== 'build') continue;
      const { image } = service;
      const at = `container.environment: services.${service.name}.build`;
      const staged = await this.deps.staging.stage(`build-${sessionId}-${service.name}`, [image.context], [true]).catch((error: unknown) => {
        throw errors.invalid(`${at}.context: ${(error as Error).message}`);
      });
      const tag = sessionImageTag(definition, service.name, sessionId);
      const previous = await runtime.inspectImage(tag);
      try {
        const built = await runtime.buildImage({
          contextDir: staged.localPaths[0]!,
          dockerfile: image.dockerfile,
          tag,
          args: image.args,
          ...(image.target !== undefined ? { target: image.target } : {}),
          labels: { [STACK_BUILD_LABEL]: definition.hash, ...this.labels(sessionId) },
          timeoutMs,
          maxContextBytes: settings.maxContextBytes,
          userNamespace: settings.userNamespace,
          buildUser: settings.buildUser,
          memoryBytes: settings.buildMemoryBytes,
          cpus: settings.buildCpus,
          pidsLimit: settings.pidsLimit,
          ...(settings.buildDiskBytes !== undefined ? { diskBytes: settings.buildDiskBytes } : {}),
          checkContainerfile: buildContainerfileCheck({ runtime, policy: settings.imagePolicy, args: image.args, at: `${at}.dockerfile "${image.dockerfile}"` }),
        });
        if (previous && previous.id !== built) await runtime.removeImage(previous.id).catch(() => false);
      } catch (error) {
        if (error instanceof BerthError) throw error;
        if (error instanceof BuildContextError) {
          if (error.reason === 'too-large') throw errors.invalid(`${at}.context: ${error.message} (SERVICE_COMPOSE_MAX_CONTEXT_BYTES is ${settings.maxContextBytes})`);
          throw errors.invalid(`${at}.dockerfile: ${error.message}`);
        }
        if (error instanceof BuildTimeoutError) {
          throw errors.stackFailed(`the build of service "${service.name}" did not finish within ${formatDuration(timeoutMs)} (build_timeout); it was stopped`);
        }
        throw errors.stackFailed(`the build of service "${service.name}" failed: ${(error as Error).message}`);
      } finally {
        await staged.release();
      }
    }
  }

  private async startService(
    sessionId: string,
    definition: StackDefinition,
    service: StackService,
    place: { readonly address: string; readonly hosts: readonly HostEntry[]; readonly environment: Readonly<Record<string, string>> },
  ): Promise<void> {
    const { runtime, settings } = this.deps;
    const binds = service.mounts.filter((mount) => mount.kind === 'bind');
    const staged = await this.deps.staging.stage(
      `stack-${sessionId}-${service.name}`,
      binds.map((mount) => mount.hostPath),
      binds.map((mount) => mount.readOnly),
    ).catch((error: unknown) => {
      throw errors.invalid(`container.environment: services.${service.name}.volumes: ${(error as Error).message}`);
    });
    try {
      // The service's root file system is read-only; /tmp, /var/tmp and /run are volumes of its own on the
      // stack's disk (Podman copies the image's content of them up, e.g. a /run/postgresql), unless the
      // compose file mounts something there itself.
      const places: VolumeMountSpec[] = [];
      for (const [containerPath, place] of SERVICE_WRITABLE_PLACES) {
        if (service.mounts.some((mount) => mount.containerPath === containerPath)) continue;
        const volume = placeVolumeName(sessionId, service.name, place);
        await this.createVolume(sessionId, volume);
        places.push({ volume, containerPath, readOnly: false });
      }
      const spec: ServiceContainerSpec = {
        name: containerName(sessionId, service.name),
        image: service.image.kind === 'build' ? sessionImageTag(definition, service.name, sessionId) : service.image.reference,
        ...(service.command ? { command: service.command } : {}),
        ...(service.entrypoint ? { entrypoint: service.entrypoint } : {}),
        env: place.environment,
        ...(service.workingDir !== undefined ? { workdir: service.workingDir } : {}),
        ...(service.user !== undefined ? { user: service.user } : {}),
        ...(service.hostname !== undefined ? { hostname: service.hostname } : {}),
        // GRANT_LABEL: the credential sweep sees the stack's grant is still held by a container.
        labels: { ...service.labels, ...this.labels(sessionId), [SERVICE_LABEL]: service.name, [GRANT_LABEL]: stackGrantId(sessionId) },
        bindMounts: binds.map((mount, index) => ({ hostPath: staged.hostPaths[index]!, containerPath: mount.containerPath, readOnly: mount.readOnly, options: [] })),
        volumeMounts: [
          ...service.mounts.flatMap((mount) =>
            mount.kind === 'volume' ? [{ volume: volumeName(sessionId, mount.volume), containerPath: mount.containerPath, readOnly: mount.readOnly }] : [],
          ),
          ...places,
        ],
        network: service.noNetwork ? undefined : { name: stackNetworkName(sessionId), aliases: [], address: place.address },
        ...(service.noNetwork ? {} : { hostEntries: place.hosts }),
        ...(service.healthcheck ? { healthcheck: service.healthcheck } : {}),
        restart: service.restart,
        memoryBytes: service.memoryBytes ?? settings.defaultMemoryBytes,
        cpus: service.cpus ?? settings.defaultCpus,
        pidsLimit: settings.pidsLimit,
        userNamespace: settings.userNamespace,
        privileges: service.privileges,
      };
      const id = await runtime.createServiceContainer(spec).catch((error: unknown) => {
        throw errors.stackFailed(`service "${service.name}" could not be created: ${(error as Error).message}`);
      });
      await runtime.startContainer(id).catch(async (error: unknown) => {
        throw errors.stackFailed(`service "${service.name}" could not be started: ${(error as Error).message}${await this.logOf(id)}`);
      });
    } finally {
      await staged.release();
    }
  }

  private async waitAllReady(sessionId: string, definition: StackDefinition, deadline: number, plan: EnvironmentPlan): Promise<void> {
    for (const service of definition.sidecars) {
      await this.waitFor(sessionId, definition, service.name, service.healthcheck ? 'service_healthy' : 'ready', deadline, plan);
    }
  }

  /**
   * Waits until the service meets the condition: started (running or ended), healthy (its healthcheck
   * passed; Berth runs it), completed successfully (ended with 0), or ready (running, or ended with 0).
   */
  private async waitFor(
    sessionId: string,
    definition: StackDefinition,
    name: string,
    condition: DependencyCondition | 'ready',
    deadline: number,
    plan: EnvironmentPlan,
  ): Promise<void> {
    const service = definition.sidecars.find((s) => s.name === name);
    if (!service) return;
    const { runtime } = this.deps;
    const id = containerName(sessionId, name);
    const intervalMs = Math.min(service.healthcheck?.intervalMs ?? POLL_MS, 1_000);
    let lastHealthcheck = 0;
    for (;;) {
      const state = await runtime.inspectContainer(id);
      if (!state) throw errors.stackFailed(`service "${name}" has no container`);
      const ended = !state.running && state.startedAtMs !== undefined;
      const restarting = service.restart === 'always' || service.restart === 'unless-stopped' || (service.restart === 'on-failure' && state.exit.exitCode !== 0);
      if (ended && !restarting) {
        if (condition === 'service_started') return;
        if (state.exit.exitCode === 0 && condition !== 'service_healthy') return;
        throw errors.stackFailed(`service "${name}" exited with code ${state.exit.exitCode}${await this.logOf(id)}`);
      }
      if (state.running) {
        if (condition === 'service_started' || condition === 'ready') return;
        if (condition === 'service_healthy' && service.healthcheck === undefined) {
          throw errors.stackFailed(`service "${name}" is depended on with condition service_healthy but has no healthcheck`);
        }
        if (condition === 'service_healthy' && Date.now() - lastHealthcheck >= intervalMs) {
          lastHealthcheck = Date.now();
          if ((await runtime.runHealthcheck(id).catch(() => 'starting' as const)) === 'healthy') return;
        }
      }
      if (Date.now() >= deadline) {
        const what = condition === 'service_completed_successfully' ? 'did not complete' : condition === 'service_healthy' ? 'did not become healthy' : 'did not start';
        throw errors.stackFailed(`service "${name}" ${what} within ${formatDuration(plan.healthTimeoutMs)} (SERVICE_COMPOSE_HEALTH_TIMEOUT)${await this.logOf(id)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, intervalMs)));
    }
  }

  private async logOf(id: string): Promise<string> {
    const tail = (await this.deps.runtime.logTail(id, LOG_TAIL_LINES).catch(() => '')).trim();
    return tail === '' ? '; it logged nothing' : `; the end of its log:\n${tail}`;
  }

  private labels(sessionId: string): Record<string, string> {
    return { [STACK_LABEL]: sessionId, [STACK_INSTANCE_LABEL]: this.deps.settings.instanceName };
  }

  private async removeNow(sessionId: string): Promise<boolean> {
    const stack = this.live.get(sessionId);
    const had = this.live.delete(sessionId);
    try {
      return (await this.removeResources(sessionId)) || had;
    } finally {
      for (const slot of stack?.slots ?? []) slot.release();
      stack?.hold?.release();
      this.countChanged();
    }
  }

  /**
   * Every container, volume and network labelled with the session's stack, and the images it built unless
   * the operator keeps them (SERVICE_COMPOSE_REMOVE_BUILT_IMAGES=false).
   */
  private async removeResources(sessionId: string): Promise<boolean> {
    const { runtime, settings } = this.deps;
    const label = `${STACK_LABEL}=${sessionId}`;
    const containers = await runtime.listContainers(label);
    await Promise.all(containers.map((container) => runtime.removeContainer(container.id)));
    const volumes = await runtime.listVolumes(label);
    for (const volume of volumes) await runtime.removeVolume(volume.name);
    // The services are gone: their credential too, and the gateway no longer admits their subnet.
    this.deps.egress?.grants.revoke(stackGrantId(sessionId));
    const networks = await runtime.listNetworks(label);
    for (const network of networks) {
      for (const subnet of network.subnets) this.deps.egress?.clients.forget(subnet);
      await runtime.removeNetwork(network.name);
    }
    let images = 0;
    if (settings.removeBuiltImages) {
      for (const image of await runtime.listImages()) {
        if (image.labels[STACK_LABEL] !== sessionId || image.labels[STACK_INSTANCE_LABEL] !== settings.instanceName) continue;
        // A run of this session still in its container keeps the image until the next removal (removeImage answers false).
        if (await runtime.removeImage(image.id).catch(() => false)) images += 1;
      }
    }
    // Last: nothing of the stack uses its disk any more.
    await this.deps.disks?.release(sessionId);
    return containers.length + volumes.length + networks.length + images > 0;
  }

  private countChanged(): void {
    this.deps.onCountChanged?.(this.live.size);
  }
}
