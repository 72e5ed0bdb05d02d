// Runs one engine turn in one container, from a validated plan, and always removes the container:
// after success, engine errors, timeouts, OOM kills, cancellation (client gone, job deleted) and
// runtime failures alike.
import type { Logger } from 'pino';
import type { RunPlan } from '../run-plan.js';
import type { ContainerExit, Containers, ContainerState, OutputChunk } from '../../runtime/ports/containers.js';
import { RuntimeError } from '../../runtime/ports/runtime-error.js';
import { containerAfterOutage, DeliveredOutput } from '../runtime-outage.js';
import { isRuntimeUnreachable, translateRuntimeError } from '../runtime-errors.js';
import { errors } from '../../errors.js';
import { LineSplitter, parseEngineLine, type ResultEnvelope } from '../../engine/stream-json.js';
import { withoutWarmUp } from '../pool/replayed-output.js';
import { turnLine } from '../../engine/stream-json-input.js';
import type { PreparedSession } from '../sessions/session-store.js';
import { OutputTail } from './output-tail.js';
import { engineContainer, type EngineContainerSettings } from '../containers/engine-container.js';
import type { RunPhases } from '../run-phases.js';
import { HostPathError, type StagedVolumes, type VolumeStaging } from '../../runtime/volume-staging.js';
import type { StackAttachment } from '../compose/stacks.js';
import type { PooledEngine } from '../pool/engine-pool.js';
import { engineHolder } from '../gateway/grant-holder.js';
import { TurnGate } from './turn-gate.js';
import { classifyExit, classifyInterruption, type RunOutcome, type StopReason } from './exit-classification.js';

export type { RunOutcome } from './exit-classification.js';

export interface RunHooks {
  /** Assistant text as the engine streams it. */
  onText?(text: string): void;
  onContainerStarted?(containerId: string): void;
  /**
   * The engine wrote a successful result: the turn is complete although the engine has not exited yet
   * (it still finishes its transcript). Given, the run ends normally afterwards, and an engine that has not
   * exited LINGER_AFTER_RESULT_MS after its result is stopped, its run still completed.
   */
  onResult?(outcome: Extract<RunOutcome, { kind: 'completed' }>): void;
}

/** How long an engine may take to exit after a successful result before Berth stops it. */
export const LINGER_AFTER_RESULT_MS = 10_000;

/**
 * The tear-down of a run answered at its result waits until no turn has run for this long (turn-gate.ts):
 * longer than the gap from one sequential run's answer to the next run's prompt (10–30 ms), so that runs
 * following each other closely are not slowed by each other's tear-downs.
 */
const TEAR_DOWN_QUIET_MS = 60;
/** ...but never longer than this: the container and the host-wide slot are held meanwhile. */
const TEAR_DOWN_MAX_WAIT_MS = 1_000;

export interface RunContext {
  readonly runId: string;
  /** The caller whose run it is: the holder of the run's credential for the model gateway. */
  readonly owner: string;
  readonly plan: RunPlan;
  readonly session: PreparedSession;
  readonly phases: RunPhases;
  /** The engine executable inside the container. */
  readonly engineBinary: string;
  readonly signal: AbortSignal;
  readonly hooks?: RunHooks;
  /** The session's compose stack the engine joins (container.environment). */
  readonly stack?: StackAttachment;
}

export interface ExecutorDependencies extends EngineContainerSettings {
  readonly runtime: Containers;
  readonly volumeStaging: VolumeStaging;
  readonly log: Logger;
}

/** A volume whose host path changed or vanished since validation: still the caller's input, a 400. */
function stagingError(error: unknown): unknown {
  if (!(error instanceof HostPathError)) return error;
  return errors.invalid(`container.volumes[${error.index}]: ${error.message}`);
}

/** Podman's refusal to create a container, as the error the caller can act on. */
// (A missing volume host path is found earlier, when the volume is staged: stagingError.)
function creationError(error: unknown): unknown {
  const translated = translateRuntimeError(error);
  if (!(translated instanceof RuntimeError)) return translated;
  return errors.runFailed(`the container could not be created: ${translated.message}`);
}

/** What watch() reads a run's engine through. */
interface EngineOutput {
  readonly output: AsyncIterable<OutputChunk>;
  close(): void;
  /**
   * The engine printed its result; `answered`: the caller has its answer already. A pooled engine's
   * container then keeps the pool's name (no rename call on the CPUs the next runs' turns use).
   */
  afterResult?(answered: boolean): void;
}

export class RunExecutor {
  /** Turns in progress, for the tear-downs of answered runs to wait for (turn-gate.ts). */
  private readonly turns = new TurnGate({ quietMs: TEAR_DOWN_QUIET_MS, maxWaitMs: TEAR_DOWN_MAX_WAIT_MS });
  /** Runs whose caller was answered at their result: their tear-down may wait for a quiet moment. */
  private readonly answered = new Set<string>();

  constructor(private readonly deps: ExecutorDependencies) {}

  async execute(context: RunContext): Promise<RunOutcome> {
    const { runId, plan } = context;
    const { runtime } = this.deps;
    const { phases } = context;
    let containerId: string | undefined;
    let staged: StagedVolumes | undefined;
    try {
      containerId = await phases.measure('create', async () => {
        staged = await this.deps.volumeStaging
          .stage(runId, plan.container.volumes.map((v) => v.hostPath), plan.container.volumes.map((v) => v.readOnly))
          .catch((error: unknown) => {
            throw stagingError(error);
          });
        const { spec, inputFiles } = engineContainer(this.deps, {
          id: runId,
          plan,
          session: context.session,
          volumeSources: staged.hostPaths,
          engineBinary: context.engineBinary,
          ...(context.stack ? { stack: context.stack } : {}),
          holder: engineHolder({ kind: 'run', runId, caller: context.owner, sessionId: context.session.sessionId, plan }),
        });
        await this.deps.inputs.write(runId, inputFiles);
        return runtime.createContainer(spec).catch((error: unknown) => {
          throw creationError(error);
        });
      });
      return await this.supervise(containerId, context, () => staged?.release());
    } finally {
      await staged?.release();
      await this.cleanUp(context, containerId);
    }
  }

  /**
   * The run's credential for the model gateway and egress proxy is refused from now on: called as soon as
   * the run's outcome is known (its result, its container's end), before anyone is answered, and again on
   * every way out.
   */
  private endCredential(context: RunContext): void {
    this.deps.gateway.grants.revoke(context.runId);
  }

  /**
   * Runs the turn in a pre-started engine of the pool: the prompt goes to its stdin as one stream-json user
   * message and stdin is closed (the engine exits after that turn); from there the run is supervised and
   * its container removed exactly as for a container made for it.
   */
  async executePooled(context: RunContext, engine: PooledEngine): Promise<RunOutcome> {
    const { runtime } = this.deps;
    try {
      return await this.watch(engine.containerId, context, context.plan.container.timeoutMs, async (stopped) => {
        // Its input ends with the prompt: the engine exits after its result. (Keeping it open until the
        // tear-down's quiet moment made the next runs faster, but runs answered one after the other then
        // ended out of order, and `continue` takes the session whose transcript came back last.)
        engine.attached.stdin.write(`${turnLine(context.plan.prompt)}\n`);
        engine.attached.stdin.end();
        // Nothing of the turn is read (so nothing answered) before the engine is the run's (see claim()).
        await engine.handedOver;
        context.phases.mark();
        if (stopped()) await runtime.killContainer(engine.containerId);
        context.hooks?.onContainerStarted?.(engine.containerId);
        return {
          output: engine.attached.output,
          close: () => engine.attached.close(),
          afterResult: () => engine.keepName(),
        };
      });
    } finally {
      await this.cleanUp(context, engine.containerId);
    }
  }

  /**
   * Follows a run whose container a previous Berth process started (it was killed or stopped with
   * `detach`): its output from the beginning through Podman's log, its timeout counted from the container's
   * real start, and the container removed at the end as for any run.
   */
  async reattach(context: RunContext, container: ContainerState): Promise<RunOutcome> {
    const { runtime } = this.deps;
    try {
      const elapsedMs = container.startedAtMs === undefined ? 0 : Date.now() - container.startedAtMs;
      return await this.watch(container.id, context, Math.max(0, context.plan.container.timeoutMs - elapsedMs), async () => {
        const following = new AbortController();
        // From the log's beginning: a pooled engine's warm-up is left out (core/pool/replayed-output.ts).
        return { output: withoutWarmUp(runtime.followOutput(container.id, following.signal)), close: () => following.abort() };
      });
    } finally {
      await this.cleanUp(context, container.id);
    }
  }

  /** Every run ends here, however it ended: its credential revoked, its container removed (phase `remove`) and its input files. */
  private async cleanUp(context: RunContext, containerId: string | undefined): Promise<void> {
    this.endCredential(context);
    // Nobody waits for this run any more (its credential is revoked already): its tear-down yields to the
    // turns of the runs that followed it. A run whose caller waits for its end is torn down at once.
    if (this.answered.delete(context.runId)) await this.turns.quiet();
    if (containerId !== undefined) {
      await context.phases
        .measure('remove', () => this.deps.runtime.removeContainer(containerId))
        .catch((error: unknown) => {
          this.deps.log.error({ err: error, runId: context.runId, containerId }, 'container removal failed; the reaper will retry at next start');
        });
    }
    await this.deps.inputs.remove(context.runId);
  }

  /** `started` releases what is only needed until the container has started (the volumes' staging mounts). */
  private async supervise(containerId: string, context: RunContext, started: () => Promise<void> | undefined): Promise<RunOutcome> {
    const { runtime } = this.deps;
    const { phases, hooks } = context;
    return this.watch(containerId, context, context.plan.container.timeoutMs, async (stopped) => {
      const attachment = await phases.measure('start', async () => {
        const attached = await runtime.attachOutput(containerId);
        try {
          await runtime.startContainer(containerId);
          await started();
        } catch (error) {
          attached.close();
          throw error;
        }
        return attached;
      });
      phases.mark();
      // A stop that arrived while the container was starting found nothing running to kill: kill it now.
      if (stopped()) await runtime.killContainer(containerId);
      hooks?.onContainerStarted?.(containerId);
      return attachment;
    });
  }

  /**
   * Reads the engine's output from `open` until the container exits, killing it at `timeoutMs` or when the
   * run's signal aborts, and says how the run ended.
   */
  private async watch(
    containerId: string,
    context: RunContext,
    timeoutMs: number,
    open: (stopped: () => boolean) => Promise<EngineOutput>,
  ): Promise<RunOutcome> {
    const { runtime } = this.deps;
    const { signal, hooks, phases } = context;
    const splitter = new LineSplitter();
    const lines = new OutputTail();
    let stderr = '';
    let envelope: ResultEnvelope | undefined;
    let stopReason: StopReason | undefined;
    const stop = (reason: StopReason) => {
      if (stopReason) return;
      stopReason = reason;
      runtime.killContainer(containerId).catch(() => undefined);
    };
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    let lingerTimer: NodeJS.Timeout | undefined;
    const consume = (line: string) => {
      lines.push(line);
      const event = parseEngineLine(line);
      if (event.kind === 'text') hooks?.onText?.(event.text);
      else if (event.kind === 'result') {
        // The turn is over: nothing in the container has any use for the model or the network any more.
        this.endCredential(context);
        endTurn();
        if (!phases.has('result')) phases.end('result');
        envelope = event.envelope;
        if (!envelope.isError && hooks?.onResult && !lingerTimer && !stopReason) {
          hooks.onResult({ kind: 'completed', envelope, rawOutput: lines.text() });
          this.answered.add(context.runId);
          lingerTimer = setTimeout(() => stop('lingered'), LINGER_AFTER_RESULT_MS);
          attached?.afterResult?.(true);
        } else attached?.afterResult?.(false);
      }
    };
    const onAbort = () => stop('cancelled');
    signal.addEventListener('abort', onAbort, { once: true });
    let attached: Pick<EngineOutput, 'close' | 'afterResult'> | undefined;
    // From the engine's start (or a pooled engine's prompt) to its result: what answered runs' tear-downs wait for.
    let endTurn = () => {};

    try {
      if (signal.aborted) throw new Error('run cancelled before start');
      const source = await open(() => stopReason !== undefined);
      attached = source;
      endTurn = this.turns.begin();
      const delivered = new DeliveredOutput();
      const readFrom = async (output: AsyncIterable<OutputChunk>) => {
        for await (const chunk of output) {
          delivered.count(chunk);
          if (chunk.stream === 'stderr') {
            stderr = (stderr + chunk.data.toString('utf8')).slice(-8192);
            continue;
          }
          if (!phases.has('first_output')) phases.end('first_output');
          for (const line of splitter.push(chunk.data)) consume(line);
        }
        for (const line of splitter.flush()) consume(line);
      };
      let reading = readFrom(source.output);
      // Awaited once the container exited; a stream broken by a runtime outage must not go unhandled meanwhile.
      reading.catch(() => undefined);
      let exit: ContainerExit;
      for (;;) {
        try {
          exit = await runtime.waitContainer(containerId);
          break;
        } catch (error) {
          if (!isRuntimeUnreachable(error)) throw error;
          this.deps.log.warn({ runId: context.runId, containerId }, 'the container runtime went away mid-run; following the container again once it is back');
          attached.close();
          await reading.catch(() => undefined);
          if (!(await containerAfterOutage(runtime, containerId))) throw new Error('the container runtime went away mid-run and the run\'s container was not found again', { cause: error });
          // A timeout or cancel that fell into the outage could not kill the container then.
          if (stopReason) await runtime.killContainer(containerId).catch(() => undefined);
          const following = new AbortController();
          attached = { close: () => following.abort() };
          reading = readFrom(delivered.resume(runtime.followOutput(containerId, following.signal)));
          reading.catch(() => undefined);
        }
      }
      // The attached stream ends with the container; give it a moment to deliver its last lines.
      await Promise.race([reading, new Promise((r) => setTimeout(r, 2_000))]);
      phases.end('engine_exit');
      attached?.close();
      await reading.catch(() => undefined);

      if (lines.truncated || splitter.droppedLines > 0) {
        this.deps.log.warn({ runId: context.runId, droppedLines: splitter.droppedLines }, 'engine output exceeded Berth\'s buffer; the oldest or overlong lines were dropped');
      }
      return classifyExit({ exit, stopReason, envelope, stderr, rawOutput: lines.text() });
    } catch (error) {
      const interrupted = classifyInterruption({ stopReason, aborted: signal.aborted, partialOutput: lines.text() });
      if (interrupted) return interrupted;
      throw error;
    } finally {
      endTurn();
      this.endCredential(context);
      clearTimeout(timer);
      clearTimeout(lingerTimer);
      signal.removeEventListener('abort', onAbort);
      attached?.close();
    }
  }
}
