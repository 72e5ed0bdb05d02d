// A pool of pre-started engines: containers created exactly as a run (or a persistent agent) of the default
// request would be (image, engine mount, credential, limits, network, hardening, labels, a fresh session
// with a pre-chosen id), each with the engine already running, warmed up (engine-ready.ts) and waiting on
// stdin; started at a lower CPU weight, it waits at a run's (engine-starts.ts). A matching run claims one
// (pool-match.ts): a ready one, else one being started that no other claim waits for. It writes its prompt
// and is then supervised and removed like any run; a matching agent takes one over as its container. A
// pooled container is never used twice. The pool refills in the background, only while the server has a
// free container slot; when, and how many, is refill-schedule.ts's. Until claimed, an engine is named as the
// pool's (`berth-pool-…`, label `berth.pool`), so that `podman ps` on an idle server shows no run in
// progress; a claimed one still running a moment later takes its claimant's name (pooledContainerName): a
// run's `berth-run-…`, an agent's `berth-agent-…` (the agents' pool starts each engine under the id of the
// agent it will be, so that a claimed one is named and labelled as a fresh agent's container).
import { setTimeout as delay } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AttachedContainer, Containers } from '../../runtime/ports/containers.js';
import type { Images } from '../../runtime/ports/images.js';
import { POOL_LABEL } from '../../runtime/ports/labels.js';
import type { CpuMeter } from '../../runtime/host-cpu.js';
import type { RunPlan } from '../run-plan.js';
import type { PreparedSession, SessionStore } from '../sessions/session-store.js';
import { engineContainer, type EngineContainerSettings } from '../containers/engine-container.js';
import type { ContainerSlots } from '../containers/container-slots.js';
import { deriveSessionTitle } from '../../engine/session-title.js';
import { poolMissReason, type MissReason } from './pool-match.js';
import { awaitEngineReady } from './engine-ready.js';
import { WARM_UP_RESULTS } from '../../engine/warm-up.js';
import { EngineStarts, type EngineStart, type StartWeight } from './engine-starts.js';
import { attachAgent, createTurnsFifo } from '../containers/agent-attachment.js';
import { engineHolder } from '../gateway/grant-holder.js';
import { RefillSchedule, RETRY_MS, type PoolSettings } from './refill-schedule.js';

/** Owner of a pooled engine's session until a caller claims it (no caller's owner starts like this). */
export const POOL_OWNER_PREFIX = '\u0000berth-pool:';

/**
 * What the pool's engines are for. `run`: one prompt on stdin in stream-json, with partial messages
 * (engine/command.ts `pooled`); the session is titled from it. `agent`: a persistent agent's engine (turns
 * on stdin, `interactive`), already past its initialize handshake, so the agent is idle as soon as it is claimed.
 */
export type PoolKind = 'run' | 'agent';

export interface PoolObserver {
  size(ready: number): void;
  hit(claimMs: number): void;
  miss(reason: MissReason): void;
  refilled(durationMs: number): void;
}

export interface PoolDependencies {
  readonly kind: PoolKind;
  readonly settings: PoolSettings;
  readonly runtime: Containers & Pick<Images, 'inspectImage'>;
  readonly sessions: SessionStore;
  readonly container: EngineContainerSettings;
  readonly slots: ContainerSlots;
  /** The plan of the default request, which every pooled engine is made for. */
  readonly template: RunPlan;
  /** The engine executable in the template's image. */
  engineBinary(): Promise<string>;
  /** How busy the host's CPUs were (RefillSchedule.afterClaim). */
  readonly cpu: CpuMeter;
  readonly log: Logger;
  readonly observer?: PoolObserver;
}

/** A pre-started engine handed to one run. */
export interface PooledEngine {
  /** `run-<uuid>`, or for the agents' pool `agent-<uuid>`: the id of the agent that claims it. */
  readonly runId: string;
  readonly containerId: string;
  readonly session: PreparedSession;
  /** stdin for the prompt, stdout/stderr from the container's start (an agent's: after its handshake). */
  readonly attached: AttachedContainer;
  /**
   * Results the engine printed before the claimant's first turn: the warm-up's (engine/warm-up.ts), 0 for
   * an engine handed over as soon as it started. `attached.output` numbers later results as a fresh
   * engine's already; an agent followed again after a restart counts its turns from its log without them.
   */
  readonly warmUpResults: number;
  /** Removes the claimed engine when its run or agent will not use it after all. */
  discard(): Promise<void>;
  /**
   * Settles once the engine's session is the claimant's (and a run's titled); a run writes its prompt before
   * and waits for it before it answers. Rejected: the engine must not be used.
   */
  readonly handedOver: Promise<void>;
  /**
   * The claimant's turn is over and its container goes soon: it keeps the pool's name instead of taking the
   * run's (a rename is a Podman call on the CPUs the next run's turn uses, for a name hardly anyone sees).
   */
  keepName(): void;
}

interface Entry extends Omit<PooledEngine, 'handedOver' | 'keepName'> {
  readonly createdAtMs: number;
  readonly imageId: string;
  readonly releaseSlot: () => void;
  exited: boolean;
  /** Its own start-up work is over (see SETTLE_*): claims take such an engine first, and only these count as ready. */
  settled: boolean;
}

/** The name engineContainer() gives a run's or an agent's container: a claimed engine's, once renamed. */
const claimedContainerName = (id: string) => `berth-${id}`;

/**
 * The name of a pooled engine until its claim: the pool's (`berth-pool-<uuid>` for the engine that will be
 * run `run-<uuid>` or agent `agent-<uuid>`), so that a listing of containers tells pre-started engines from runs in progress.
 */
export function pooledContainerName(runId: string): string {
  return `berth-pool-${runId.replace(/^(run|agent)-/, '')}`;
}

/**
 * How long after its claim an engine still running takes its run's (or agent's) name. Not at the claim: a rename is a
 * Podman call (a container lock and a write of its state) on the 2 cores a claimed run's turn is using, and
 * a default run is answered and removed within this time anyway; a long run or an agent is renamed.
 */
const RENAME_AFTER_CLAIM_MS = 1_000;

/**
 * The CPU weight of an engine while the pool starts it: an eighth of a run's, so that pre-starting engines
 * (each start is about half a second of CPU) yields to the runs and turns at work on a small machine without
 * starving (the agents' handshake still finishes under load). Once ready, an engine idles at the run's own
 * weight, so a claim changes nothing in Podman: a `podman update` (and its runc) on the claim's path cost
 * the turn it started about 10 ms of CPU on a 2-core machine.
 */
export function waitingCpuShares(runShares: number): number {
  return Math.max(2, Math.floor(runShares / 8));
}

/** How long an agent's engine may take to answer its initialize handshake before it counts as failed. */
const READY_TIMEOUT_MS = 60_000;

/**
 * After its warm-up an engine keeps working on its own for a while (about 0.19 s of CPU over 1.75 s on a
 * 2-core host: its session's files, its start-up tasks). A run that claimed an engine then shared the CPUs
 * with the engines it had not claimed, and the first runs after a refill were slower than later ones. An
 * engine counts as ready (berth_pool_ready) once its main process used less than SETTLE_CPU_SECONDS in
 * each of SETTLE_QUIET_SAMPLES samples of SETTLE_SAMPLE_MS in a row (its work comes in bursts with quiet
 * quarters of a second between them), or after SETTLE_MAX_MS; a claim takes a settled engine first, but takes one still
 * settling rather than none.
 */
const SETTLE_SAMPLE_MS = 250;
const SETTLE_CPU_SECONDS = 0.015;
const SETTLE_QUIET_SAMPLES = 3;
const SETTLE_MAX_MS = 5_000;

export class EnginePool {
  private readonly ready: Entry[] = [];
  /** Engines being started now. */
  private starting = 0;
  /** Engines no run has claimed, by container name, from before their creation until their removal: their run ids. */
  private readonly unclaimed = new Map<string, string>();
  private readonly unclaimedSessions = new Set<string>();
  private readonly removals = new Set<Promise<void>>();
  /** Renames of claimed engines waiting for RENAME_AFTER_CLAIM_MS (cancelled at close). */
  private readonly renames = new Map<string, NodeJS.Timeout>();
  /** Whether the last takeFresh() found engines but none fit (stale or dead), for the miss reason. */
  private lastStale = false;
  private closed = false;
  /** When to start engines and how many (refill-schedule.ts). */
  private readonly schedule: RefillSchedule;
  /**
   * Claims waiting for an engine being started, oldest first; each is promised one of the starts in
   * progress (never more waiters than starts), and gets undefined when its start fails.
   */
  private readonly waiters: ((entry: Entry | undefined) => void)[] = [];
  /** The CPU weights of the starts in progress (engine-starts.ts). */
  private readonly starts: EngineStarts;

  constructor(private readonly deps: PoolDependencies) {
    this.starts = new EngineStarts((containerId) => deps.runtime.setCpuShares(containerId, deps.template.container.cpuShares));
    this.schedule = new RefillSchedule({
      settings: deps.settings,
      cpu: deps.cpu,
      counts: () => ({ ready: this.ready.length, starting: this.starting, waiting: this.waiters.length }),
      start: (count) => this.startEngines(count),
    });
  }

  /** Container ids of the engines ready now. */
  readyContainers(): string[] {
    return this.ready.map((entry) => entry.containerId);
  }

  /** Names of every container the pool holds now: being started, ready or being removed (no run's). */
  ownContainerNames(): string[] {
    return [...this.unclaimed.keys()];
  }

  /** What the pool holds on disk now: its engines' session ids and run ids (their configuration directories). */
  ownFiles(): { readonly sessionIds: string[]; readonly runIds: string[] } {
    return { sessionIds: [...this.unclaimedSessions], runIds: [...this.unclaimed.values()] };
  }

  get enabled(): boolean {
    return this.deps.settings.size > 0;
  }

  /** Removes sessions pooled engines of a killed process left, then fills the pool. */
  async start(): Promise<void> {
    // Without an engine configuration there is nothing to pre-start (runs are refused with 503 anyway).
    if (!this.enabled || this.deps.container.engineAccess.status().mode === 'not-configured') return;
    const removed = await this.deps.sessions.removeUnused(POOL_OWNER_PREFIX);
    if (removed > 0) this.deps.log.info({ removed, kind: this.deps.kind }, 'removed the unused sessions of pooled engines a previous process left');
    this.schedule.fill();
  }

  /** Whether the run's plan is one a pooled engine can serve (whether one is ready or not). */
  matches(plan: RunPlan): boolean {
    return this.missReason(plan) === undefined;
  }

  private missReason(plan: RunPlan): MissReason | undefined {
    return poolMissReason(plan, this.deps.template);
  }

  /**
   * A pre-started engine for this run, or undefined (the miss is counted by reason, `refused` when given). The engine's session
   * becomes the caller's (a run's is titled from its prompt). `imageId`: the id the run's image check found
   * for the plan's image, when it made one (saves asking Podman again).
   */
  async claim(plan: RunPlan, owner: string, imageId?: string, refused?: MissReason): Promise<PooledEngine | undefined> {
    if (!this.enabled || this.closed) return undefined;
    const started = performance.now();
    // `refused`: what the caller found that the plan does not show (a workspace with the engine's own settings).
    const reason = refused ?? this.missReason(plan);
    if (reason !== undefined) return this.missed(reason);
    // Only a run waits for an engine being started: it answers at its result anyway, where POST /agents
    // answers at once with the agent `starting` when no engine is ready.
    const entry = (await this.takeFresh(imageId)) ?? (this.deps.kind === 'run' ? await this.startedForThisRun() : undefined);
    this.schedule.afterClaim();
    if (!entry) return this.missed(this.lastStale ? 'stale' : 'empty');
    // The session's owner and a run's title are the session store's work: a run writes its prompt meanwhile
    // and waits for them before it answers (handedOver); an agent waits here.
    const title = this.deps.kind === 'run' ? deriveSessionTitle(plan.prompt) : undefined;
    const handedOver = Promise.all([
      this.deps.sessions.assignOwner(entry.session.sessionId, owner),
      title === undefined ? undefined : entry.session.recordTitle?.(title),
    ]).then(() => undefined);
    handedOver.catch(() => undefined);
    if (this.deps.kind === 'agent') {
      try {
        await handedOver;
      } catch (error) {
        this.deps.log.warn({ err: error, runId: entry.runId }, 'a pooled engine could not be handed over; it is removed');
        await this.dispose(entry);
        return this.missed('stale');
      }
    }
    // The engine's credential is the caller's from now on (refused until here), with the run's egress policy
    // and budget; an agent binds it again once it has its id.
    this.deps.container.gateway.grants.bind(
      entry.runId,
      engineHolder({ kind: this.deps.kind, runId: entry.runId, caller: owner, sessionId: entry.session.sessionId, plan }),
    );
    // From here the caller's slot covers the container.
    entry.releaseSlot();
    this.unclaimed.delete(pooledContainerName(entry.runId));
    const keepName = this.renameWhenClaimed(entry);
    this.unclaimedSessions.delete(entry.session.sessionId);
    this.deps.observer?.hit(performance.now() - started);
    return { ...entry, handedOver, keepName };
  }

  /** A claimed engine still running after RENAME_AFTER_CLAIM_MS takes its run's or agent's name (a gone one is left alone). */
  private renameWhenClaimed(entry: Entry): () => void {
    const timer = setTimeout(() => {
      this.renames.delete(entry.runId);
      this.deps.runtime.renameContainer(entry.containerId, claimedContainerName(entry.runId)).catch((error: unknown) => {
        // Removed meanwhile (the run ended as the rename came): nothing to name. Otherwise it keeps the pool's name.
        this.deps.log.debug({ err: error, runId: entry.runId }, 'a claimed pooled engine was not renamed');
      });
    }, RENAME_AFTER_CLAIM_MS);
    timer.unref();
    this.renames.set(entry.runId, timer);
    return () => {
      clearTimeout(timer);
      this.renames.delete(entry.runId);
    };
  }

  /** Removes a claimed engine that will not run (its run was abandoned). */
  private async discardClaimed(engine: { readonly containerId: string; readonly runId: string; readonly attached: AttachedContainer }): Promise<void> {
    this.deps.container.gateway.grants.revoke(engine.runId);
    await this.deps.runtime.removeContainer(engine.containerId).catch(() => undefined);
    engine.attached.close();
    await this.deps.container.inputs.remove(engine.runId);
  }

  /** Removes every ready engine (credentials or image changed, shutdown); the pool refills unless closed. */
  async drain(reason: string): Promise<void> {
    const drained = this.ready.splice(0);
    this.reportSize();
    if (drained.length > 0) this.deps.log.info({ reason, kind: this.deps.kind, count: drained.length }, 'pooled engines removed');
    await Promise.all(drained.map((entry) => this.dispose(entry)));
    this.schedule.fill();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.schedule.close();
    for (const timer of this.renames.values()) clearTimeout(timer);
    this.renames.clear();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    // A start in progress finishes and finds the pool closed: it disposes of what it made.
    await this.drain('shutdown');
    while (this.starting > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.allSettled([...this.removals]);
  }

  /**
   * The oldest ready engine that is still running, younger than SERVICE_POOL_MAX_AGE, and made with the
   * current image; the others are removed (and the whole pool when the image changed). The model's
   * credential is not the engines' concern: they hold a per-run one, and the gateway the model's.
   */
  private async takeFresh(knownImageId: string | undefined): Promise<Entry | undefined> {
    this.lastStale = false;
    if (this.ready.length === 0) return undefined;
    const { runtime, template, container } = this.deps;
    const currentImageId = knownImageId ?? (await runtime.inspectImage(template.container.image))?.id;
    for (;;) {
      const settled = this.ready.findIndex((candidate) => candidate.settled);
      const entry = this.ready.splice(Math.max(settled, 0), 1)[0];
      if (!entry) {
        this.reportSize();
        return undefined;
      }
      if (currentImageId !== entry.imageId) {
        this.ready.unshift(entry);
        this.lastStale = true;
        await this.drain('the agent image changed');
        return undefined;
      }
      if (entry.exited || this.schedule.expired(entry.createdAtMs, Date.now())) {
        this.lastStale = true;
        void this.dispose(entry);
        continue;
      }
      this.reportSize();
      return entry;
    }
  }

  /**
   * The next engine being started, when one is not yet promised to another claim: it is ready sooner than
   * an engine this run would start itself (the same work, begun earlier), and a second start would only
   * compete with it for the CPU.
   */
  private nextStarted(): Promise<Entry | undefined> {
    if (this.closed || this.starting <= this.waiters.length) return Promise.resolve(undefined);
    const promised = new Promise<Entry | undefined>((resolve) => this.waiters.push(resolve));
    // The start is now the run's work: at the run's weight, not the pool's (engine-starts.ts).
    this.starts.promote(this.waiters.length);
    return promised;
  }

  /**
   * A start ended (startOne() says so exactly once, and the count drops at that moment, so that no claim
   * waits on a start that has already ended): its engine goes to the oldest waiting claim, else into
   * the pool.
   */
  private started(entry: Entry | undefined): void {
    this.starting -= 1;
    const waiter = this.waiters.shift();
    if (waiter) waiter(entry);
    else if (entry) {
      this.ready.push(entry);
      void this.watchSettling(entry);
    }
  }

  private missed(reason: MissReason): undefined {
    this.deps.observer?.miss(reason);
    return undefined;
  }

  /**
   * A run that found no ready engine waits for one being started, starting it when none is free to be
   * promised: the same one engine start as without a pool (its prompt goes in at once, create()), the rest
   * of the pool left for a pause.
   */
  private startedForThisRun(): Promise<Entry | undefined> {
    // (startEngines() itself does nothing once the pool is closed.)
    if (this.schedule.startsForClaim()) {
      // Started for a run that waits for it: at the run's own CPU weight from the start.
      this.startEngines(1, 'claimed');
    }
    return this.nextStarted();
  }

  private startEngines(count: number, weight: StartWeight = 'waiting'): void {
    if (this.closed || !this.enabled) return;
    // Counted first: a start may end at once (no free slot), which must not make this loop start another.
    for (let i = 0; i < count; i++) {
      this.starting += 1;
      void this.startOne(weight);
    }
  }

  private async startOne(weight: StartWeight): Promise<void> {
    const start = this.starts.begin(weight);
    let ended = false;
    const end = (entry: Entry | undefined) => {
      if (ended) return;
      ended = true;
      start.end();
      this.started(entry);
    };
    // Pooled engines count against SERVICE_MAX_CONTAINERS, but a run that finds the server full takes
    // a pooled engine's slot (the engine is removed); with no free slot the pool waits for one.
    let made: Entry | undefined;
    let reclaimed = false;
    const slot = this.deps.slots.takeReclaimable(POOL_OWNER_PREFIX, () => {
      reclaimed = true;
      if (made) void this.evict(made);
    });
    if (!slot) {
      end(undefined);
      this.schedule.retryLater();
      return;
    }
    const started = performance.now();
    try {
      const entry = await this.create(slot, start);
      made = entry;
      if (this.closed || reclaimed) {
        end(undefined);
        await this.dispose(entry);
        if (!this.closed) this.schedule.retryLater();
        return;
      }
      end(entry);
      this.reportSize();
      this.deps.observer?.refilled(performance.now() - started);
    } catch (error) {
      slot.release();
      end(undefined);
      this.deps.log.warn({ err: error }, `a pooled engine could not be started; retrying in ${RETRY_MS / 1000} s`);
      this.schedule.retryLater();
    }
  }

  private async create(slot: { release(): void }, start: EngineStart): Promise<Entry> {
    const { runtime, sessions, template, container } = this.deps;
    // An agent's engine has the agent's id (AgentService.spawn takes it): named and labelled as a fresh agent's.
    const runId = `${this.deps.kind}-${randomUUID()}`;
    const [image, engineBinary] = await Promise.all([runtime.inspectImage(template.container.image), this.deps.engineBinary()]);
    if (!image) throw new Error(`the agent image ${template.container.image} is not present`);
    // Named before anything exists: whoever looks at containers or sessions can tell the pool's apart.
    const sessionId = randomUUID();
    this.unclaimed.set(pooledContainerName(runId), runId);
    this.unclaimedSessions.add(sessionId);
    let session: PreparedSession;
    try {
      session = await sessions.prepare(template.session, template.workdir, {
        owner: `${POOL_OWNER_PREFIX}${runId}`, runId, presetId: sessionId, diskBytes: template.container.diskBytes,
      });
    } catch (error) {
      this.unclaimed.delete(pooledContainerName(runId));
      this.unclaimedSessions.delete(sessionId);
      throw error;
    }
    let containerId: string | undefined;
    let attached: AttachedContainer | undefined;
    let warmUpResults = 0;
    try {
      const agent = this.deps.kind === 'agent';
      const { spec: runSpec, inputFiles } = engineContainer(container, {
        id: runId, plan: template, session, volumeSources: [], engineBinary, ...(agent ? { interactive: true } : { pooled: true }),
      });
      // The pool's name and label until a claim; the run label (the run id it will serve) is what the grant
      // sweep, the reaper and a restart's follow-up of a job key on, claimed or not.
      const asPools = { ...runSpec, name: pooledContainerName(runId), labels: { ...runSpec.labels, [POOL_LABEL]: this.deps.kind } };
      const spec = start.createdWith === 'waiting' ? { ...asPools, cpuShares: waitingCpuShares(runSpec.cpuShares) } : asPools;
      await container.inputs.write(runId, inputFiles);
      if (agent) await createTurnsFifo(container.inputs, runId);
      containerId = await runtime.createContainer(spec);
      attached = agent ? await attachAgent(runtime, container.inputs, containerId, runId) : await runtime.attach(containerId);
      await runtime.startContainer(containerId);
      await start.started(containerId);
      if (start.createdWith === 'waiting') {
        // Ready means past the engine's own start (about half a second of CPU) and warm: a run or agent that
        // claims it then only pays for its turn, and the start is not spent while a claimed engine works.
        attached = await awaitEngineReady(attached, READY_TIMEOUT_MS);
        warmUpResults = WARM_UP_RESULTS;
        // Ready, it idles at the run's weight: a claim then has nothing to change (waitingCpuShares).
        await start.ready();
      }
      // An engine started for a run that waits for it is handed over at once: the run's prompt waits in
      // its stdin until the engine has started, as a fresh run's prompt file would (the handshake and the
      // warm-up would only delay that run, by about 80 ms, and cost CPU a loaded host has not to spare).
    } catch (error) {
      container.gateway.grants.revoke(runId);
      attached?.close();
      if (containerId !== undefined) await runtime.removeContainer(containerId).catch(() => undefined);
      await container.inputs.remove(runId);
      await session.release();
      this.unclaimed.delete(pooledContainerName(runId));
      this.unclaimedSessions.delete(sessionId);
      throw error;
    }
    const handed = { containerId, runId, attached };
    const entry: Entry = {
      runId, containerId, session, attached, warmUpResults, createdAtMs: Date.now(), imageId: image.id, releaseSlot: () => slot.release(), exited: false, settled: false,
      discard: () => this.discardClaimed(handed),
    };
    // An engine that dies while waiting is noticed here and never handed out; the pool refills.
    void runtime.waitContainer(containerId).then(
      () => this.exitedWhileReady(entry),
      () => this.exitedWhileReady(entry),
    );
    return entry;
  }

  /** A ready engine whose slot a run took over. */
  private async evict(entry: Entry): Promise<void> {
    const index = this.ready.indexOf(entry);
    if (index < 0) return;
    this.ready.splice(index, 1);
    this.reportSize();
    await this.dispose(entry);
  }

  private exitedWhileReady(entry: Entry): void {
    entry.exited = true;
    const index = this.ready.indexOf(entry);
    if (index < 0) return;
    this.ready.splice(index, 1);
    this.reportSize();
    this.deps.log.warn({ runId: entry.runId }, 'a pooled engine exited while waiting; it is replaced');
    void this.dispose(entry).then(() => this.schedule.fill());
  }

  /** Removes an unclaimed engine: its container, inputs, slot and its never-used session. */
  private dispose(entry: Entry): Promise<void> {
    // Tracked, so that close() waits for removals started in the background (evictions, stale engines).
    const removal = this.removeEngine(entry).finally(() => this.removals.delete(removal));
    this.removals.add(removal);
    return removal;
  }

  private async removeEngine(entry: Entry): Promise<void> {
    this.deps.container.gateway.grants.revoke(entry.runId);
    await this.deps.runtime.removeContainer(entry.containerId).catch((error: unknown) => {
      this.deps.log.error({ err: error, runId: entry.runId }, 'a pooled engine\'s container could not be removed; the reaper will at the next start');
    });
    entry.attached.close();
    await this.deps.container.inputs.remove(entry.runId);
    entry.releaseSlot();
    await entry.session.release().catch(() => undefined);
    this.unclaimed.delete(pooledContainerName(entry.runId));
    this.unclaimedSessions.delete(entry.session.sessionId);
  }

  private reportSize(): void {
    this.deps.observer?.size(this.ready.filter((entry) => entry.settled).length);
  }

  /** Marks a ready engine settled once its start-up work is over (SETTLE_*), while it is still ready. */
  private async watchSettling(entry: Entry): Promise<void> {
    // Not readable (the container gone already, another host's Podman): settled at once, as before.
    const cpu = await Promise.resolve()
      .then(() => this.deps.runtime.mainProcessCpu(entry.containerId))
      .catch(() => undefined);
    const deadline = performance.now() + SETTLE_MAX_MS;
    let last = await cpu?.();
    let quiet = 0;
    while (last !== undefined && quiet < SETTLE_QUIET_SAMPLES && performance.now() < deadline && this.ready.includes(entry) && !this.closed) {
      await delay(SETTLE_SAMPLE_MS);
      const now = await cpu!();
      if (now === undefined) break;
      quiet = now - last < SETTLE_CPU_SECONDS ? quiet + 1 : 0;
      last = now;
    }
    entry.settled = true;
    if (this.ready.includes(entry)) this.reportSize();
  }
}
