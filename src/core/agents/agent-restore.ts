// Finding a persistent agent again after a restart of the service (kill -9, a crash, or a stop with
// SERVICE_SHUTDOWN_MODE=detach): its container, attached again for stdin and live output, its session taken
// again through the run's own configuration directory, and whether the turn it was generating ended while
// no process followed it (its result line is then in the container's log).
import type { Logger } from 'pino';
import type { PreparedSession } from '../sessions/session-store.js';
import type { AttachedContainer } from '../../runtime/ports/containers.js';
import type { AgentRecord } from '../../store/agents/agent-store.js';
import { AgentContainer, type AgentContainerDependencies } from './agent-container.js';
import { turnResultOf, type TurnResult } from './agent.js';
import { attachAgent } from '../containers/agent-attachment.js';
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

/**
 * What Berth reads of an agent's log at a restart: only when a turn was in progress, only what was logged
 * since that turn started (no turn can start while no process follows the agent, so at most its result
 * line and the lines before it), and at most this much of it. The engine prints nothing after a result
 * line until its next turn, so that line is among the last ones.
 */
export const RESTORE_LOG_LINES = 1_000;
export const RESTORE_LOG_BYTES = 16 * 1024 * 1024;

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
  let live: AttachedContainer;
  try {
    live = await attachAgent(runtime, deps.container.inputs, state.id, record.inputsId);
  } catch (error) {
    await runtime.removeContainer(state.id).catch(() => undefined);
    await deps.container.inputs.remove(record.inputsId).catch(() => undefined);
    await session.release().catch(() => undefined);
    return { kind: 'gone', exitError: `agent: it could not be attached again after the restart (${(error as Error).message}); the agent was stopped` };
  }
  const attached = { ...live, output: renumberedOutput(live.output, record.warmUpResults) };
  const ended = record.currentTurn === null ? undefined : await turnEndedWhileDown(deps, record, state.id);
  const container = AgentContainer.resume(deps.container, state.id, record.inputsId, attached, session);
  return {
    kind: 'running',
    container,
    turnsEnded: record.turnsEnded + (ended ? 1 : 0),
    turnsCompleted: record.turnsCompleted + (ended && !ended.failed ? 1 : 0),
    currentTurn: ended ? undefined : (record.currentTurn ?? undefined),
  };
}

/** How the turn in progress at the restart ended while no process followed it, if it did (a bounded read). */
async function turnEndedWhileDown(deps: RestoreDependencies, record: AgentRecord, containerId: string): Promise<TurnResult | undefined> {
  try {
    // The record's last activity is the turn's start: whatever the engine printed before it is not read.
    const log = await deps.container.runtime.logTail(containerId, RESTORE_LOG_LINES, { sinceMs: Date.parse(record.lastActivityAt), maxBytes: RESTORE_LOG_BYTES });
    return log.split('\n').map((text) => turnResultOf({ kind: 'line', text })).find((result) => result !== undefined);
  } catch (error) {
    deps.log.warn({ err: error, agentId: record.id }, 'an agent\'s log could not be read; its turn in progress is taken as still running');
    return undefined;
  }
}

/** An agent whose engine exited while the service was down: its session gets what the engine wrote. */
async function releaseLeftovers(deps: RestoreDependencies, record: AgentRecord): Promise<void> {
  const session = await deps.sessions.reclaim({
    runId: record.runId, sessionId: record.sessionId, owner: record.owner, workdir: record.workdir, persistent: record.persistent,
  }).catch(() => undefined);
  await session?.release().catch(() => undefined);
  await deps.container.inputs.remove(record.inputsId).catch(() => undefined);
}
