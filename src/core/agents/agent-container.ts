// The container behind one persistent agent: created with an open stdin, attached before start (so no
// output is missed), its output cut into lines for the agent, and stopped with SIGTERM then SIGKILL after
// the grace period. Its container is removed in every case, and its session released afterwards.
import type { Logger } from 'pino';
import type { RunPlan } from '../run-plan.js';
import type { PreparedSession } from '../sessions/session-store.js';
import type { AttachedContainer, Containers } from '../../runtime/ports/containers.js';
import { engineContainer, type EngineContainerSettings } from '../containers/engine-container.js';
import { LineReader, type ReadLine } from './line-reader.js';
import type { PooledEngine } from '../pool/engine-pool.js';
import { attachAgent, createTurnsFifo } from '../containers/agent-attachment.js';
import { writeWithin } from '../containers/turns-input.js';
import { containerAfterOutage, DeliveredOutput } from '../runtime-outage.js';
import { isRuntimeUnreachable } from '../runtime-errors.js';
import type { GrantHolder } from '../gateway/gateway-types.js';

/** Stopping an agent: a termination signal, then a kill after 5 s. */
export const STOP_GRACE_MS = 5_000;

export interface AgentContainerDependencies extends EngineContainerSettings {
  readonly runtime: Containers;
  readonly log: Logger;
}

/** Where the container's output and end go. */
export interface AgentSink {
  stdout(line: ReadLine): void;
  stderr(line: ReadLine): void;
  /** The engine ended; `reason` is the stop reason Berth gave, or what the exit says. */
  exit(reason: string): void;
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1)?.slice(0, 500) ?? '';
}

export class AgentContainer {
  private stopReason: string | undefined;
  /** Let go at a detaching shutdown: the container runs on, nothing is removed or released. */
  private detached = false;
  private stderrTail = '';
  /** Following the log again after a runtime outage (see run()). */
  private resumed: AbortController | undefined;
  private monitoring: Promise<void> | undefined;

  private constructor(
    private readonly deps: AgentContainerDependencies,
    readonly containerId: string,
    /** Names the container's input directory (RunInputs): the agent's id, or the pooled engine's run id. */
    readonly inputsId: string,
    private readonly attached: AttachedContainer,
    private readonly session: PreparedSession,
  ) {}

  /**
   * Creates, attaches and starts the container, its credential bound to `holder`; on any failure nothing
   * is left behind (the session is the caller's).
   */
  static async start(deps: AgentContainerDependencies, agentId: string, plan: RunPlan, session: PreparedSession, engineBinary: string, holder: GrantHolder): Promise<AgentContainer> {
    const { spec, inputFiles } = engineContainer(deps, { id: agentId, plan, session, volumeSources: [], engineBinary, interactive: true, holder });
    const { runtime } = deps;
    let containerId: string | undefined;
    let attached: AttachedContainer | undefined;
    try {
      await deps.inputs.write(agentId, inputFiles);
      await createTurnsFifo(deps.inputs, agentId);
      containerId = await runtime.createContainer(spec);
      attached = await attachAgent(runtime, deps.inputs, containerId, agentId);
      await runtime.startContainer(containerId);
      return new AgentContainer(deps, containerId, agentId, attached, session);
    } catch (error) {
      deps.gateway.grants.revoke(agentId);
      attached?.close();
      if (containerId !== undefined) await runtime.removeContainer(containerId).catch(() => undefined);
      await deps.inputs.remove(agentId);
      throw error;
    }
  }

  /** An agent's running container found again after a restart (core/agents/agent-restore.ts), attached anew. */
  static resume(deps: AgentContainerDependencies, containerId: string, inputsId: string, attached: AttachedContainer, session: PreparedSession): AgentContainer {
    return new AgentContainer(deps, containerId, inputsId, attached, session);
  }

  /**
   * Takes over a pre-started engine of the agents' pool: created, attached, started and past its handshake.
   * `session` is the one the agent was accepted with (the engine's, holding the agent's workspace): released
   * when the agent ends, it gives the workspace back (the engine's own session alone would not).
   */
  static adopt(deps: AgentContainerDependencies, engine: PooledEngine, session: PreparedSession): AgentContainer {
    return new AgentContainer(deps, engine.containerId, engine.runId, engine.attached, session);
  }

  /**
   * One line on the engine's input (its turns FIFO): resolves once the engine has it, rejects with
   * TurnNotTaken when it has not read it within `timeoutMs` (turns-input.ts).
   */
  async write(line: string, timeoutMs: number): Promise<void> {
    if (!this.attached.stdin.writable) throw new Error('the engine\'s stdin is closed');
    await writeWithin(this.attached.stdin, `${line}\n`, timeoutMs);
  }

  /** Feeds the sink until the engine has exited, then removes the container and releases the session. */
  monitor(sink: AgentSink): Promise<void> {
    this.monitoring ??= this.run(sink);
    return this.monitoring;
  }

  /** Drops the attach connection only (shutdown with detach): the engine goes on; monitor() ends without removing anything. */
  detach(): void {
    this.detached = true;
    this.attached.close();
  }

  /** SIGTERM, SIGKILL after the grace period; resolves when the container is gone. */
  async stop(reason: string, graceMs = STOP_GRACE_MS): Promise<void> {
    this.stopReason ??= reason;
    // Whatever the engine does in its grace period, it does without the model or the network.
    this.endCredential();
    const { runtime } = this.deps;
    await runtime.killContainer(this.containerId, 'SIGTERM').catch(() => undefined);
    const ended = this.monitoring ?? Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = await Promise.race([
      ended.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs))),
    ]);
    clearTimeout(timer);
    if (graceOver) await runtime.killContainer(this.containerId, 'SIGKILL').catch(() => undefined);
    await ended;
  }

  private async run(sink: AgentSink): Promise<void> {
    const { runtime, log } = this.deps;
    const stdout = new LineReader();
    const stderr = new LineReader();
    const delivered = new DeliveredOutput();
    let exitReason = 'agent: the engine exited';
    try {
      let output = this.attached.output;
      for (;;) {
        try {
          for await (const chunk of output) {
            delivered.count(chunk);
            if (chunk.stream === 'stdout') for (const line of stdout.push(chunk.data)) sink.stdout(line);
            else {
              this.stderrTail = (this.stderrTail + chunk.data.toString('utf8')).slice(-4096);
              for (const line of stderr.push(chunk.data)) sink.stderr(line);
            }
          }
        } catch (error) {
          if (!this.detached) log.warn({ err: error, containerId: this.containerId }, 'agent output stream failed');
        }
        if (this.detached || !(await this.outageSurvived())) break;
        // The engine went on (its input is a FIFO, not the attach stream): its output is read again from the log.
        this.resumed = new AbortController();
        output = delivered.resume(runtime.followOutput(this.containerId, this.resumed.signal));
      }
      for (const line of stdout.flush()) sink.stdout(line);
      for (const line of stderr.flush()) sink.stderr(line);
      if (this.detached) return;
      // The output stream ends with the container. Should it end first (a connection lost for good), nobody
      // can read the agent's answers any more: make sure the container ends.
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        runtime.waitContainer(this.containerId),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), STOP_GRACE_MS))),
      ]).catch(() => undefined);
      clearTimeout(timer);
      if (!exit) await runtime.killContainer(this.containerId, 'SIGKILL').catch(() => undefined);
      if (exit) {
        const tail = lastLine(this.stderrTail);
        exitReason = `agent: the engine exited with code ${exit.exitCode}${exit.oomKilled ? ' (out of memory)' : ''}${tail ? `: ${tail}` : ''}`;
      }
    } finally {
      if (!this.detached) await this.release(sink, exitReason);
    }
  }

  /** The agent's credential for the model gateway (keyed by its container's id, as its inputs) is refused from now on. */
  private endCredential(): void {
    this.deps.gateway.grants.revoke(this.inputsId);
  }

  /** Whether the output stream broke because the runtime went away, and the container still runs now it is back. */
  private async outageSurvived(): Promise<boolean> {
    const { runtime, log } = this.deps;
    try {
      await runtime.inspectContainer(this.containerId);
      return false;
    } catch (error) {
      if (!isRuntimeUnreachable(error)) return false;
    }
    log.warn({ containerId: this.containerId }, 'the container runtime went away; following the agent again once it is back');
    return (await containerAfterOutage(runtime, this.containerId))?.running === true;
  }

  /** Resources first, then the exited event: a subscriber that sees it may rely on the container being gone. */
  private async release(sink: AgentSink, exitReason: string): Promise<void> {
    const { runtime, log } = this.deps;
    this.endCredential();
    this.attached.close();
    this.resumed?.abort();
    await runtime.removeContainer(this.containerId).catch((error: unknown) => {
      log.error({ err: error, containerId: this.containerId }, 'agent container removal failed; the reaper will retry at next start');
    });
    await this.deps.inputs.remove(this.inputsId).catch(() => undefined);
    await this.session.release().catch((error: unknown) => log.error({ err: error }, 'agent session release failed'));
    sink.exit(this.stopReason ?? exitReason);
  }
}
