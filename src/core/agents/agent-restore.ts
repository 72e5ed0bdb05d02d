// Finding a persistent agent again after a restart of the service (kill -9, a crash, or a stop with
// SERVICE_SHUTDOWN_MODE=detach): its container, attached again for stdin and live output, its session taken
// again through the run's own configuration directory, and whether the turn it was generating ended while
// no process followed it (its result line is then in the container's log).
import type { Logger } from 'pino';
import type { PreparedSession } from '../sessions/session-store.js';
import type { ContainerRuntime } from '../../runtime/container-runtime.js';
import type { AgentRecord } from '../../store/agents/agent-store.js';
import { AgentContainer, type AgentContainerDependencies } from './agent-container.js';
import { turnResultOf } from './agent.js';
import { attachAgent } from './agent-attachment.js';
import { renumberedOutput } from '../pool/renumbered-output.js';

export interface RestoreDependencies {
  readonly container: AgentContainerDependencies;
  readonly sessions: {
    reclaim(run: { readonly runId: string; readonly sessionId: string; readonly owner: string; readonly workdir: string; readonly persistent: boolean }): Promise<PreparedSession | undefined>;
  };
  readonly log: Logger;
}

export type FoundAgent =
  | {
      readonly kind: 'running';
      readonly container: AgentContainer;
      readonly turnsCompleted: number;
      readonly turnsEnded: number;
      /** The turn still being generated, if the engine has not printed its result yet. */
      readonly currentTurn: string | undefined;
    }
  | { readonly kind: 'gone'; readonly exitError: string };

/** Largest log Berth reads to count an agent's result lines. */
const LOG_LINES = 1_000_000;

export async function findAgentAgain(deps: RestoreDependencies, record: AgentRecord): Promise<FoundAgent> {
  const { runtime } = deps.container;
  const state = await runtime.inspectContainer(record.container);
  if (!state) {
    await releaseLeftovers(deps, record);
    return { kind: 'gone', exitError: 'agent: its container was gone when the service restarted' };
  }
  if (!state.running) {
    await runtime.removeContainer(state.id).catch(() => undefined);
    await releaseLeftovers(deps, record);
    return { kind: 'gone', exitError: `agent: the engine exited with code ${state.exit.exitCode}${state.exit.oomKilled ? ' (out of memory)' : ''} while the service was down` };
  }
  const session = await deps.sessions.reclaim({
    runId: record.runId, sessionId: record.sessionId, owner: record.owner, workdir: record.workdir, persistent: record.persistent,
  });
  if (!session) {
    await runtime.removeContainer(state.id).catch(() => undefined);
    await deps.container.inputs.remove(record.inputsId).catch(() => undefined);
    return { kind: 'gone', exitError: 'agent: its session\'s run directory was gone when the service restarted; the agent was stopped' };
  }
  // Attached before the log is read: a result line printed in between is in the log, and also arrives live,
  // where an idle agent ignores it for its turn count.
  // A warmed engine's output is renumbered as when it was claimed (core/pool/renumbered-output.ts).
  const live = await attachAgent(runtime, deps.container.inputs, state.id, record.inputsId);
  const attached = { ...live, output: renumberedOutput(live.output, record.warmUpResults) };
  let results: ReturnType<typeof turnResultOf>[] = [];
  try {
    const log = await runtime.logTail(state.id, LOG_LINES);
    // The log starts with the engine's start: a pooled engine's warm-up result there is no turn.
    results = log.split('\n').map((text) => turnResultOf({ kind: 'line', text })).filter((result) => result !== undefined).slice(record.warmUpResults);
  } catch (error) {
    deps.log.warn({ err: error, agentId: record.id }, 'an agent\'s log could not be read; its turn in progress is taken as still running');
  }
  const endedWhileDown = Math.max(0, results.length - record.turnsEnded);
  const completedWhileDown = results.slice(record.turnsEnded).filter((result) => result && !result.failed).length;
  const container = AgentContainer.resume(deps.container, state.id, record.inputsId, attached, session);
  return {
    kind: 'running',
    container,
    turnsEnded: record.turnsEnded + endedWhileDown,
    turnsCompleted: record.turnsCompleted + completedWhileDown,
    currentTurn: endedWhileDown > 0 ? undefined : (record.currentTurn ?? undefined),
  };
}

/** An agent whose engine exited while the service was down: its session gets what the engine wrote. */
async function releaseLeftovers(deps: RestoreDependencies, record: AgentRecord): Promise<void> {
  const session = await deps.sessions.reclaim({
    runId: record.runId, sessionId: record.sessionId, owner: record.owner, workdir: record.workdir, persistent: record.persistent,
  }).catch(() => undefined);
  await session?.release().catch(() => undefined);
  await deps.container.inputs.remove(record.inputsId).catch(() => undefined);
}
