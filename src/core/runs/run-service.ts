// The use case "run a prompt": validate, check the image, take the session, execute, and shape the result.
// Shared by every run mode; the modes differ only in how they deliver what this returns.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, errors } from '../../errors.js';
import type { RunRequest } from '../run-request.js';
import type { EnvironmentPlan, RunPlan } from '../run-plan.js';
import type { StackAttachment, Stacks } from '../compose/stacks.js';
import { pooledContainerName, type EnginePool, type PooledEngine } from '../pool/engine-pool.js';
import { deriveSessionTitle } from '../../engine/session-title.js';
import type { Containers, ContainerState } from '../../runtime/ports/containers.js';
import type { Images } from '../../runtime/ports/images.js';
import type { Secrets } from '../../runtime/ports/secrets.js';
import { validateRunRequest, type ValidationSettings } from '../validation/validate-run.js';
import type { SessionStore, PreparedSession } from '../sessions/session-store.js';
import type { ImageCheck } from './image-check.js';
import type { RunExecutor, RunHooks, RunOutcome } from './run-executor.js';
import type { EngineAccess } from '../engine-access.js';
import { cumulativeUsage, readTranscript } from '../../engine/transcript.js';
import { estimateCostUsd } from '../../engine/pricing.js';
import type { TokenUsage } from '../../engine/stream-json.js';
import { RunPhases, type PhaseDurations } from '../run-phases.js';
import type { Caller } from '../auth/caller.js';
import { RunSlot, type ContainerSlots } from '../containers/container-slots.js';
import { ENGINE_BINARY } from '../../engine/layout.js';
import { context, trace, type Span } from '@opentelemetry/api';
import { endRunSpan, startRunSpan } from './run-tracing.js';
import { runOutcomeLabel, type RunMode, type RunOutcomeLabel } from './run-labels.js';
import type { RunResult, RunUsage } from './run-result.js';
import type { RunWorkspaces, WorkspaceCheck } from './run-workspace.js';
import type { MissReason } from '../pool/pool-match.js';
import type { RunGrants } from '../gateway/run-grants.js';
import type { BudgetDecision } from '../gateway/gateway-types.js';

/** The caller's daily model limits, checked before a run gets anything (core/gateway/budgets.ts). */
export interface BudgetAdmission {
  /** Answers from memory when the caller's total for the day is there; reads it from the usage store otherwise. */
  admission(caller: string, now: number): Promise<BudgetDecision>;
}

export interface RunObserver {
  runFinished(mode: RunMode, outcome: RunOutcomeLabel, durationMs: number, phases: PhaseDurations): void;
  containerStarted(): void;
  containerStopped(): void;
}

export interface RunServiceDependencies {
  /** The configuration every request is validated against (the service reads nothing else of it). */
  readonly config: ValidationSettings;
  readonly runtime: Pick<Containers, 'inspectContainer' | 'removeContainer'> & Pick<Images, 'inspectImage'> & Pick<Secrets, 'secretExists'>;
  readonly sessions: SessionStore;
  readonly images: ImageCheck;
  readonly executor: RunExecutor;
  readonly engineAccess: EngineAccess;
  readonly slots: ContainerSlots;
  /** Where webhook_url may point (core/webhooks/destination-policy.ts). */
  readonly webhookDestinations: { check(url: string): Promise<void> };
  readonly log: Logger;
  readonly observer?: RunObserver;
  /** Aborted at service shutdown: every run in flight is cancelled and its container removed. */
  readonly shutdownSignal?: AbortSignal;
  /** Compose stacks of sessions (container.environment). */
  readonly stacks?: Stacks;
  /** Pre-started engines for runs (SERVICE_POOL_SIZE). */
  readonly pool?: EnginePool;
  /** Pre-started engines for persistent agents (SERVICE_AGENT_POOL_SIZE). */
  readonly agentPool?: EnginePool;
  /** The workspace each run works in (core/runs/run-workspace.ts); without it, runs have none. */
  readonly workspaces?: RunWorkspaces;
  /** The runs' credentials for the model gateway: revoked at every run's end, their budget refusals read. */
  readonly grants: RunGrants;
  /** The caller's daily model limits (SERVICE_CALLER_*_PER_DAY); absent: none. */
  readonly budgets?: BudgetAdmission;
}

/** A validated run whose session is taken: what async jobs keep between acceptance and execution. */
export interface AcceptedRun {
  readonly runId: string;
  readonly plan: RunPlan;
  readonly session: PreparedSession;
  /** Where the run's time goes, from acceptance to the container's removal. */
  readonly phases: RunPhases;
  /** Its place under SERVICE_MAX_CONTAINERS(_PER_CALLER); released with its container. */
  readonly slot: RunSlot;
  /** The run's trace span (a no-op when tracing is off), ended when the run ends or is abandoned. */
  readonly span: Span;
  /** The engine executable inside the container (mounted, or the image's own). */
  readonly engineBinary: string;
  /** The pre-started engine the run claimed, when it matched the pool. */
  readonly pooled?: PooledEngine;
  /** The workspace the run holds and has at its workdir (released with its session). */
  readonly workspaceId?: string;
}

interface AcceptOptions {
  readonly caller: Caller;
  readonly sessionId?: string;
  /** 'later': an async job, which waits for its container slot while pending. */
  readonly slot?: 'now' | 'later';
  /** The run id a job was given by a previous process (acceptAgain); such a run never takes a pooled engine. */
  readonly runId?: string;
  /** What the engine is for: a one-shot run (the default) or a persistent agent; each has its own pool. */
  readonly purpose?: 'run' | 'agent';
}

const workspaceOf = (workspaceId: string | undefined) => (workspaceId === undefined ? {} : { workspaceId });

export function newRunId(): string {
  return `run-${randomUUID()}`;
}

export class RunService {
  /** Runs being executed, by their promise: drained at shutdown, named while they drain. */
  private readonly inFlight = new Map<Promise<unknown>, string>();
  private accepting = true;

  constructor(private readonly deps: RunServiceDependencies) {}

  /** Shutdown: from now on every new run, job and agent is refused (503); runs in flight go on. */
  stopAccepting(): void {
    this.accepting = false;
  }

  /** The ids of the runs being executed now (shutdown progress). */
  inFlightRuns(): string[] {
    return [...this.inFlight.values()];
  }

  /** Resolves when every run in flight has ended (used at shutdown, after the shutdown signal). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inFlight.keys()]);
  }

  /** Everything that can refuse a request, before any container exists. */
  async accept(
    request: RunRequest,
    options: AcceptOptions,
  ): Promise<AcceptedRun> {
    // A caller whose daily model budget is spent gets nothing: no slot, no session, no container. Asked first:
    // it may wait for the usage store, and a stop that began meanwhile must still refuse the run.
    const admission = await this.deps.budgets?.admission(options.caller.owner, Date.now());
    if (!this.accepting) throw errors.shuttingDown();
    if (admission && !admission.ok) throw errors.budgetExceeded(admission.message);
    const slot = new RunSlot(this.deps.slots, options.caller.owner);
    // Taken first: a caller at its limit is refused before anything is validated, locked or created.
    if (options.slot !== 'later') await slot.acquire();
    try {
      return await this.acceptWith(request, options, slot);
    } catch (error) {
      slot.release();
      throw error;
    }
  }

  /**
   * A run a previous Berth process started (an async job it left running), found again: its container, still
   * running or exited meanwhile, and its session. Undefined when there is nothing to follow (the container or
   * the run's directory is gone); a container that cannot be followed is removed.
   */
  async reattach(run: { readonly runId: string; readonly sessionId: string; readonly request: RunRequest; readonly caller: Caller }): Promise<{ accepted: AcceptedRun; container: ContainerState } | undefined> {
    // A pooled engine claimed just before the previous process ended may still have the pool's name.
    const container =
      (await this.deps.runtime.inspectContainer(`berth-${run.runId}`)) ?? (await this.deps.runtime.inspectContainer(pooledContainerName(run.runId)));
    if (!container) return undefined;
    const phases = new RunPhases();
    try {
      const plan = await validateRunRequest(run.request, { config: this.deps.config, secretExists: async () => true });
      const session = await this.reclaimSession(
        { runId: run.runId, sessionId: run.sessionId, owner: run.caller.owner, workdir: plan.workdir, persistent: plan.session.kind !== 'ephemeral' },
        'run',
      );
      if (!session) throw new Error(`the configuration directory of run ${run.runId} is gone`);
      const slot = new RunSlot(this.deps.slots, run.caller.owner);
      // The container exists whatever the limits say; it is counted when there is room.
      try {
        await slot.acquire();
      } catch {
        // Over the limit already: followed uncounted.
      }
      phases.mark();
      return { accepted: { runId: run.runId, plan, session, phases, slot, span: startRunSpan(phases), engineBinary: ENGINE_BINARY }, container };
    } catch (error) {
      this.deps.log.warn({ err: error, runId: run.runId }, 'a run left by the previous process cannot be followed again; its container is removed');
      await this.deps.runtime.removeContainer(container.id).catch(() => undefined);
      return undefined;
    }
  }

  /**
   * The session of a run or agent a previous process started, taken again (SessionStore.reclaim) with the
   * workspace bound at its workdir held again for it: released like any run's when it ends.
   */
  async reclaimSession(
    run: { readonly runId: string; readonly sessionId: string; readonly owner: string; readonly workdir: string; readonly persistent: boolean },
    kind: 'run' | 'agent',
  ): Promise<PreparedSession | undefined> {
    const session = await this.deps.sessions.reclaim(run);
    if (!session || !this.deps.workspaces) return session;
    return this.deps.workspaces.reattach(session, run.owner, { kind, id: run.runId });
  }

  /**
   * A job a previous process accepted but never started, accepted again under the same run and session ids:
   * the session it had made for the run, never used, is made anew; refusals are those of a new request.
   */
  async acceptAgain(run: { readonly runId: string; readonly sessionId: string; readonly request: RunRequest; readonly caller: Caller }): Promise<AcceptedRun> {
    await this.deps.sessions.removeIfNeverRun(run.sessionId, run.caller.owner);
    return this.accept(run.request, { caller: run.caller, slot: 'later', sessionId: run.sessionId, runId: run.runId });
  }

  /** Gives up an accepted run that will not be executed: its session and its slot. */
  async abandon(accepted: AcceptedRun): Promise<void> {
    if (accepted.pooled) await accepted.pooled.discard();
    accepted.slot.release();
    endRunSpan(accepted.span, accepted.phases, { runId: accepted.runId, sessionId: accepted.session.sessionId, mode: 'abandoned', outcome: 'abandoned' });
    await accepted.session.release();
  }

  private async acceptWith(request: RunRequest, options: AcceptOptions, slot: RunSlot): Promise<AcceptedRun> {
    const phases = new RunPhases();
    const span = startRunSpan(phases);
    const accepted = await this.acceptPhases(request, options, slot, phases).catch((error: unknown) => {
      span.recordException(error as Error);
      endRunSpan(span, phases, { runId: '', sessionId: '', mode: 'refused', outcome: 'refused' });
      throw error;
    });
    return { ...accepted, span };
  }

  private async acceptPhases(
    request: RunRequest,
    options: AcceptOptions,
    slot: RunSlot,
    phases: RunPhases,
  ): Promise<Omit<AcceptedRun, 'span'>> {
    const plan = await phases.measure('validate', async () => {
      const validated = await validateRunRequest(request, {
        config: this.deps.config,
        secretExists: (name) => this.deps.runtime.secretExists(name),
      });
      if (validated.webhookUrl !== undefined) await this.deps.webhookDestinations.check(validated.webhookUrl);
      return validated;
    });
    const workspace = await phases.measure('validate', () => this.checkWorkspace(plan, options.caller.owner));
    this.deps.engineAccess.current();
    const { engineBinary, imageId } = await phases.measure('image_check', async () => {
      const environment = plan.container.environment;
      if (environment) {
        if (!this.deps.stacks) throw errors.invalid('container.environment: compose environments are not available on this server');
        await this.checkServiceImages(environment);
        // An agent image Berth builds is checked once it exists (after the build, in execute()).
        if (environment.definition.agent.image.kind === 'build') return { engineBinary: ENGINE_BINARY, imageId: undefined };
      }
      const imageId = await this.deps.images.ensureRunnable(plan.container.image);
      return { engineBinary: await this.deps.images.engineBinary(plan.container.image), imageId };
    });
    // A run like the default request takes a pre-started engine (and its session) when one is ready.
    const refused = workspace.configuresEngine ? 'workspace' : undefined;
    const pool = options.runId === undefined ? await this.poolFor(options, slot, plan, refused) : undefined;
    const pooled = pool ? await phases.measure('claim', async () => pool.claim(plan, options.caller.owner, imageId, refused)) : undefined;
    if (pooled) {
      const attached = await this.attachWorkspace(plan, pooled.session, options, pooled.runId, phases, () => pooled.discard());
      phases.mark();
      return { runId: pooled.runId, plan, session: attached.session, phases, slot, engineBinary, pooled, ...workspaceOf(attached.workspaceId) };
    }
    const runId = options.runId ?? newRunId();
    // The run's configuration directory is named by its run id: a later process can follow the run again.
    const session = await phases.measure('session', async () => {
      const prepared = await this.deps.sessions.prepare(plan.session, plan.workdir, {
        owner: options.caller.owner,
        runId,
        diskBytes: plan.container.diskBytes,
        ...(options.sessionId !== undefined ? { presetId: options.sessionId } : {}),
      });
      // A new run session is titled from its prompt; an agent's session is not listed.
      const title = options.purpose === 'agent' ? undefined : deriveSessionTitle(plan.prompt);
      try {
        if (title !== undefined) await prepared.recordTitle?.(title);
      } catch (error) {
        await prepared.release();
        throw error;
      }
      return prepared;
    });
    const attached = await this.attachWorkspace(plan, session, options, runId, phases, async () => undefined);
    phases.mark();
    return { runId, plan, session: attached.session, phases, slot, engineBinary, ...workspaceOf(attached.workspaceId) };
  }

  /** A named workspace must be the caller's (404), and workspaces available on this Berth (503). */
  private async checkWorkspace(plan: RunPlan, owner: string): Promise<WorkspaceCheck> {
    if (plan.workspace.kind !== 'given') return { configuresEngine: false };
    if (!this.deps.workspaces) throw errors.runtimeUnavailable('workspaces are not available on this server');
    return this.deps.workspaces.check(plan.workspace, owner);
  }

  /**
   * The run's workspace held and bound at its workdir before its engine can write there. Refused (404, 409,
   * 400): the claimed engine is removed (`discard`) and the session released, so nothing of the run is left.
   */
  private async attachWorkspace(
    plan: RunPlan,
    session: PreparedSession,
    options: AcceptOptions,
    runId: string,
    phases: RunPhases,
    discard: () => Promise<void>,
  ): Promise<{ session: PreparedSession; workspaceId: string | undefined }> {
    const { workspaces } = this.deps;
    if (!workspaces || plan.workspace.kind === 'none') return { session, workspaceId: undefined };
    try {
      return await phases.measure('workspace', () =>
        workspaces.attach(plan.workspace, session, options.caller.owner, { kind: options.purpose === 'agent' ? 'agent' : 'run', id: runId }),
      );
    } catch (error) {
      await discard().catch(() => undefined);
      await workspaces.releaseUnattached(session).catch((releaseError: unknown) => {
        this.deps.log.error({ err: releaseError, runId }, 'releasing the session of a run refused its workspace failed');
      });
      throw error;
    }
  }

  /**
   * The pool the run may take a pre-started engine from: the agents' for an agent, the runs' otherwise, and
   * for an async job only when it can take its container slot now (a pooled engine must not be held by a
   * job still waiting for one).
   */
  private async poolFor(options: AcceptOptions, slot: RunSlot, plan: RunPlan, refused: MissReason | undefined): Promise<EnginePool | undefined> {
    const pool = options.purpose === 'agent' ? this.deps.agentPool : this.deps.pool;
    if (!pool?.enabled) return undefined;
    if (options.slot !== 'later') return pool;
    // A miss is counted by claim(); an async job that cannot match keeps waiting for its slot as before.
    if (refused !== undefined || !pool.matches(plan)) return pool;
    try {
      await slot.acquire();
      return pool;
    } catch {
      return undefined;
    }
  }

  /** The stack's images that are not built must be on the host: Berth never pulls implicitly. */
  private async checkServiceImages(environment: EnvironmentPlan): Promise<void> {
    for (const service of environment.definition.sidecars) {
      if (service.image.kind !== 'image') continue;
      if (!(await this.deps.runtime.inspectImage(service.image.reference))) {
        throw errors.invalid(`container.environment: services.${service.name}.image "${service.image.reference}" is not present on this host; pull it first (POST /images/pull) or build it`);
      }
    }
  }

  /** The session's stack for this run, up and ready; the engine's image checked when the stack built it. */
  private async attachStack(accepted: AcceptedRun): Promise<{ stack: StackAttachment | undefined; engineBinary: string; plan: RunPlan }> {
    const environment = accepted.plan.container.environment;
    if (!environment || !this.deps.stacks) return { stack: undefined, engineBinary: accepted.engineBinary, plan: accepted.plan };
    const stack = await this.deps.stacks.acquire(accepted.session.sessionId, accepted.slot.owner, environment, accepted.phases, {
      ephemeral: !accepted.session.persistent,
      egress: accepted.plan.container.network,
    });
    try {
      if (stack.agentImage === undefined) return { stack, engineBinary: accepted.engineBinary, plan: accepted.plan };
      // The engine runs in the image this session's stack built (tagged for the session alone).
      const plan: RunPlan = { ...accepted.plan, container: { ...accepted.plan.container, image: stack.agentImage } };
      await this.deps.images.ensureRunnable(plan.container.image);
      return { stack, engineBinary: await this.deps.images.engineBinary(plan.container.image), plan };
    } catch (error) {
      await stack.release();
      throw error;
    }
  }

  /** Runs an accepted run to its outcome and releases its session. */
  async execute(accepted: AcceptedRun, mode: RunMode, signal: AbortSignal, hooks: RunHooks = {}, container?: ContainerState): Promise<RunOutcome> {
    const running = this.executeTracked(accepted, mode, signal, hooks, container);
    this.inFlight.set(running, accepted.runId);
    try {
      return await running;
    } finally {
      this.inFlight.delete(running);
    }
  }

  /** `container`: the run's container, started by a previous process, is followed again instead of created. */
  private async executeTracked(accepted: AcceptedRun, mode: RunMode, callerSignal: AbortSignal, hooks: RunHooks, container?: ContainerState): Promise<RunOutcome> {
    const signal = this.deps.shutdownSignal ? AbortSignal.any([callerSignal, this.deps.shutdownSignal]) : callerSignal;
    const started = Date.now();
    const { observer } = this.deps;
    const { phases } = accepted;
    // Only an async job waits between acceptance and execution (for a slot); other modes go straight on.
    if (mode === 'async') phases.end('queue');
    let outcome: RunOutcome | undefined;
    let stack: StackAttachment | undefined;
    try {
      // A re-attached run's stack is up already (its container was started by the previous process).
      const attached = container ? { stack: undefined, engineBinary: accepted.engineBinary, plan: accepted.plan } : await this.attachStack(accepted);
      stack = attached.stack;
      // The run's own span is the parent of what the executor does (Podman calls) for this run.
      const runContext = {
        runId: accepted.runId,
        owner: accepted.slot.owner,
        plan: attached.plan,
        session: accepted.session,
        phases,
        engineBinary: attached.engineBinary,
        ...(stack ? { stack } : {}),
        signal,
        hooks: {
          onText: hooks.onText,
          onResult: hooks.onResult,
          onContainerStarted: (id: string) => {
            observer?.containerStarted();
            hooks.onContainerStarted?.(id);
          },
        },
      };
      if (container) observer?.containerStarted();
      const { pooled } = accepted;
      outcome = await context.with(trace.setSpan(context.active(), accepted.span), () =>
        container
          ? this.deps.executor.reattach(runContext, container)
          : pooled
            ? this.deps.executor.executePooled(runContext, pooled)
            : this.deps.executor.execute(runContext),
      );
      return outcome;
    } finally {
      const outcomeLabel = runOutcomeLabel(outcome);
      // (The executor revoked it already, at the outcome; this covers a run that never reached it.)
      this.deps.grants.revoke(accepted.runId);
      const durationMs = Date.now() - started;
      observer?.containerStopped();
      const phaseDurations = phases.toJSON();
      observer?.runFinished(mode, outcomeLabel, durationMs, phaseDurations);
      // Logged under the run's own span, still recording: a run answered at its result ends after its
      // request's span did.
      context.with(trace.setSpan(context.active(), accepted.span), () =>
        this.deps.log.info(
          { runId: accepted.runId, sessionId: accepted.session.sessionId, mode, outcome: outcomeLabel, durationMs, phases: phaseDurations },
          'run finished',
        ),
      );
      endRunSpan(accepted.span, phases, { runId: accepted.runId, sessionId: accepted.session.sessionId, mode, outcome: outcomeLabel });
      accepted.slot.release();
      await stack?.release().catch((error: unknown) => this.deps.log.error({ err: error, runId: accepted.runId }, 'releasing the run\'s compose stack failed'));
      await accepted.session.release();
    }
  }

  /** POST /run: the whole run, answered as the run response or as the error it ended in. */
  async runSync(request: RunRequest, signal: AbortSignal, caller: Caller): Promise<RunResult> {
    const accepted = await this.accept(request, { caller });
    const outcome = await this.executeUntilAnswered(accepted, 'sync', signal);
    return this.toResult(accepted, outcome);
  }

  /**
   * Runs an accepted run until its caller can be answered. A run that started a session (new or ephemeral)
   * is answered as soon as its engine wrote a successful result: the engine then still spends about a
   * tenth of a second finishing its transcript and exiting, and the container's removal and the carrying
   * back of the transcript follow. That rest goes on in the background, no longer tied to the caller's
   * connection; meanwhile every request that reads or takes the session waits for it (SessionStore.settled),
   * so nobody sees the session before its transcript is in place. The usage of a new session is its one
   * turn's, which the result carries. Other runs (resume, fork, continue) answer when their container has
   * exited, their usage summed over the session's transcript.
   */
  async executeUntilAnswered(accepted: AcceptedRun, mode: 'sync' | 'stream', callerSignal: AbortSignal, hooks: RunHooks = {}): Promise<RunOutcome> {
    const kind = accepted.session.engineSession.kind;
    if (kind !== 'new' && kind !== 'ephemeral') return this.execute(accepted, mode, callerSignal, hooks);
    const run = new AbortController();
    const follow = () => run.abort(callerSignal.reason);
    if (callerSignal.aborted) follow();
    else callerSignal.addEventListener('abort', follow, { once: true });
    return new Promise<RunOutcome>((resolve, reject) => {
      let running: Promise<RunOutcome> | undefined;
      running = this.execute(accepted, mode, run.signal, {
        ...hooks,
        onResult: (outcome) => {
          callerSignal.removeEventListener('abort', follow);
          // The caller has its answer: its own container limit no longer counts this run, which the
          // server's limit still does until the container is gone (container-slots.ts).
          accepted.slot.answered();
          if (running) {
            this.deps.sessions.settleInBackground(accepted.session.sessionId, running);
            this.deps.workspaces?.settleInBackground(accepted.workspaceId, running);
          }
          resolve(outcome);
        },
      });
      // The first of the result and the run's end answers; the later one changes nothing.
      void running.then(resolve, reject).then(() => callerSignal.removeEventListener('abort', follow));
    });
  }

  async toResult(accepted: AcceptedRun, outcome: RunOutcome): Promise<RunResult> {
    const budget = this.budgetError(accepted, outcome);
    if (budget) throw budget;
    const outputFormat = accepted.plan.engine.output_format ?? 'text';
    switch (outcome.kind) {
      case 'completed': {
        const usage = await this.sessionUsage(accepted, outcome.envelope.usage, outcome.envelope.model);
        return {
          id: accepted.runId,
          status: 'completed',
          output: outputFormat === 'stream-json' ? outcome.rawOutput : outcome.envelope.result,
          session_id: accepted.session.sessionId,
          ...(usage ? { usage } : {}),
          ...(outcome.envelope.structuredOutput !== undefined && accepted.plan.engine.json_schema !== undefined
            ? { structured_output: outcome.envelope.structuredOutput }
            : {}),
        };
      }
      case 'failed':
        throw errors.runFailed(`engine failed: ${outcome.message}`);
      case 'crashed':
        throw this.crashError(accepted, outcome);
    }
  }

  /**
   * A run that did not complete after the gateway refused one of its model requests for a budget ended
   * because of that limit, whatever the engine made of the refusal: the error names the limit (429). A run
   * stopped by the service's shutdown is still that.
   */
  budgetError(accepted: AcceptedRun, outcome: RunOutcome): BerthError | undefined {
    if (outcome.kind === 'completed' || (outcome.kind === 'crashed' && outcome.reason === 'cancelled')) return undefined;
    const refusal = this.deps.grants.refusalOf(accepted.runId);
    return refusal ? errors.budgetExceeded(refusal.message) : undefined;
  }

  crashError(accepted: AcceptedRun, outcome: Extract<RunOutcome, { kind: 'crashed' }>): BerthError {
    const budget = this.budgetError(accepted, outcome);
    if (budget) return budget;
    switch (outcome.reason) {
      case 'oom':
        return errors.runOom(accepted.plan.container.memoryText);
      case 'timeout':
        return errors.runTimeout(accepted.plan.container.timeoutText);
      case 'cancelled':
        // Cancelled by a stop of the service (not by its caller): a 503 that says how to go on.
        if (!this.accepting) return errors.runStoppedByShutdown(accepted.session.sessionId);
        return errors.runFailed('run was cancelled; the container was removed');
      case 'signal':
        return errors.runFailed(`engine was killed by ${outcome.signal || 'a signal'} (exit code ${outcome.exitCode}); the container was removed`);
    }
  }

  /** Cumulative usage of the session from its transcript; this turn's usage when nothing was persisted. */
  private async sessionUsage(accepted: AcceptedRun, turnUsage: TokenUsage | undefined, model: string | undefined): Promise<RunUsage | undefined> {
    let total: { usage: TokenUsage; model: string | undefined } | undefined;
    if (accepted.session.persistent) {
      const records = await readTranscript(this.deps.sessions.pathOf(accepted.session.sessionId), accepted.session.sessionId).catch(() => []);
      total = cumulativeUsage(records);
    }
    total ??= turnUsage ? { usage: turnUsage, model } : undefined;
    if (!total) return undefined;
    return { token_usage: total.usage, estimated_cost_usd: estimateCostUsd(total.usage, total.model ?? model) };
  }
}
