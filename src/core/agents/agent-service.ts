// The persistent agents use case and the process-local registry: spawn (validated like a run, then one
// container per agent), send, subscribe, list, delete, the idle watchdog, and stopping every agent at
// shutdown. Exited agents stay in the registry for a retention period so their exit_error can be read.
import type { Caller } from '../auth/caller.js';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, errors } from '../../errors.js';
import type { RunRequest } from '../run-request.js';
import type { AcceptedRun, BudgetAdmission } from '../runs/run-service.js';
import { engineHolder } from '../gateway/grant-holder.js';
import { checkPrompt } from '../validation/text.js';
import { Agent, type AgentOptions } from './agent.js';
import { READY_REQUEST } from '../../engine/stream-json-input.js';
import { AgentContainer, type AgentContainerDependencies } from './agent-container.js';
import { AGENT_STATUSES, EXIT_REASONS, type AgentSnapshot, type AgentSpawnRequest, type AgentStatus } from './agent-types.js';
import { eventStreams, type EventLog } from '../../store/events/event-log.js';
import { StreamRecorder } from '../events/stream-recorder.js';
import { replayThenLive, type EventsLostEvent } from '../events/replay.js';
import type { AgentEvent } from './agent-types.js';
import { IdleWatchdog, type Timers } from './watchdog.js';
import { findAgentAgain, type RestoreDependencies } from './agent-restore.js';
import type { AgentRecord, AgentStore } from '../../store/agents/agent-store.js';
import { OrderedWrites } from '../../store/ordered-writes.js';
import { RunSlot, type ContainerSlots } from '../containers/container-slots.js';
import { TurnNotTaken } from '../containers/turns-input.js';
import { formatDuration } from '../../units.js';

export interface AgentServiceDependencies {
  /** Validation, image check and session taking, shared with runs. */
  readonly runs: { accept(request: RunRequest, options: { readonly caller: Caller; readonly purpose: 'agent' }): Promise<AcceptedRun> };
  readonly sessions: { hide(sessionId: string): Promise<void> } & RestoreDependencies['sessions'];
  /**
   * The replayable event log (store/events): every agent event is kept there under its id, so a client
   * reconnects with Last-Event-ID without missing any. Absent (unit tests): live events only, no ids.
   */
  readonly events?: EventLog;
  /** Durable records, so that a restarted service finds its agents again (absent in unit tests). */
  readonly store?: AgentStore;
  /** Where restored agents take their container slots. */
  readonly slots?: ContainerSlots;
  readonly container: AgentContainerDependencies;
  readonly defaultIdleTimeoutSeconds: number;
  readonly idleTickMs: number;
  /** How long an exited agent's record stays readable (SERVICE_AGENT_EXITED_RETENTION), also across a restart. */
  readonly exitedRetentionMs: number;
  readonly maxPromptBytes: number;
  /** How long a turn may wait for the engine to read it (SERVICE_AGENT_SEND_TIMEOUT); then the agent is stopped. */
  readonly sendTimeoutMs: number;
  /** Event streams per agent (SERVICE_AGENT_MAX_SUBSCRIBERS). */
  readonly maxSubscribers: number;
  readonly log: Logger;
  readonly observer?: { statusCounts(counts: Readonly<Record<AgentStatus, number>>): void };
  /** The caller's daily model limits, checked before each turn (SERVICE_CALLER_*_PER_DAY); absent: none. */
  readonly budgets?: BudgetAdmission;
  readonly now?: () => number;
  readonly timers?: Timers;
}

/** One client's view of an agent's events (follow()). */
export interface AgentEventStream {
  readonly events: AsyncIterable<AgentEvent | EventsLostEvent>;
  close(): void;
}

interface Entry {
  readonly agent: Agent;
  /** Undefined for an agent found gone at start (listed as exited only). */
  readonly container: AgentContainer | undefined;
  /** Resolves when the engine has exited and its container is removed. */
  readonly ended: Promise<void>;
  /** The caller that spawned it (core/auth/caller.ts). */
  readonly owner: string;
  /** With a shared database: saves the agent's session so far there (at each turn's end; sessions/session-store.ts). */
  readonly saveSession?: () => Promise<void>;
  stopping?: Promise<void>;
}

// The run validation requires a prompt; an agent spawned without one is validated with this stand-in,
// which is never sent to the engine.
const NO_FIRST_PROMPT = 'berth: agent spawned without a first prompt';

export class AgentService {
  private readonly entries = new Map<string, Entry>();
  private readonly watchdog: IdleWatchdog;
  /** Writes of the agents' durable records, in order per agent. */
  private readonly writes: OrderedWrites;
  private closed = false;
  /** Shutdown begun: no new turns (503). */
  private refusingTurns = false;

  constructor(private readonly deps: AgentServiceDependencies) {
    this.writes = new OrderedWrites((agentId, what, error) => deps.log.error({ err: error, agentId }, `${what} failed: a restart may find this agent as it was before`));
    this.watchdog = new IdleWatchdog(
      {
        agents: () => [...this.entries.values()].map((entry) => entry.agent),
        stop: (agent, reason) => void this.stopEntry(agent.id, reason),
        forget: (agent) => {
          this.entries.delete(agent.id);
          this.writeRecord(agent.id, 'removing the agent\'s record', (store) => store.remove(agent.id));
          this.forgetEvents(agent.id);
          this.reportStatuses();
        },
      },
      { tickMs: deps.idleTickMs, exitedRetentionMs: deps.exitedRetentionMs, now: deps.now, timers: deps.timers },
    );
    this.watchdog.start();
    this.reportStatuses();
  }

  async spawn(request: AgentSpawnRequest, caller: Caller): Promise<AgentSnapshot> {
    if (this.closed) throw errors.agentSpawnFailed('the service is shutting down');
    const idleTimeoutSeconds = this.idleTimeoutOf(request.idle_timeout_seconds);
    if (request.prompt !== undefined && request.prompt.trim() === '') {
      throw errors.invalid('prompt: must not be empty when given; omit it to start the agent without a first turn');
    }
    const accepted = await this.deps.runs.accept(
      {
        prompt: request.prompt ?? NO_FIRST_PROMPT,
        ...(request.workdir !== undefined ? { workdir: request.workdir } : {}),
        ...(request.workspace !== undefined ? { workspace: request.workspace } : {}),
        ...(request.engine !== undefined ? { engine: request.engine } : {}),
        ...(request.container?.network !== undefined ? { container: { network: request.container.network } } : {}),
      },
      // Agents have a pool of their own: an engine taking turns has neither the title hook nor partial messages.
      { caller, purpose: 'agent' },
    );
    const { session } = accepted;
    // A pooled engine was started under the id of the agent it would be (`agent-<uuid>`, engine-pool.ts), so
    // that its container is named and labelled as a fresh agent's.
    const agentId = accepted.pooled?.runId ?? `agent-${randomUUID()}`;
    let container: AgentContainer;
    try {
      // A session the agent creates is its own: hidden from GET /sessions and its messages never served.
      if (session.engineSession.kind === 'new' || session.engineSession.kind === 'fork') await this.deps.sessions.hide(session.sessionId);
      const holder = (runId: string) =>
        engineHolder({ kind: 'agent', runId, caller: caller.owner, sessionId: session.sessionId, plan: accepted.plan, agentId });
      if (accepted.pooled) {
        // Bound to the caller at the claim already; now with the agent's id too (its usage is listed by it).
        this.deps.container.gateway.grants.bind(accepted.pooled.runId, holder(accepted.pooled.runId));
        container = AgentContainer.adopt(this.deps.container, accepted.pooled, session);
      } else {
        container = await AgentContainer.start(this.deps.container, agentId, accepted.plan, session, accepted.engineBinary, holder(agentId));
      }
    } catch (error) {
      await accepted.pooled?.discard();
      accepted.slot.release();
      await session.release().catch(() => undefined);
      if (error instanceof BerthError) throw error;
      this.deps.log.error({ err: error, agentId }, 'agent spawn failed');
      throw errors.agentSpawnFailed((error as Error).message);
    }

    const disabled = request.disable_idle_timeout === true;
    const agent = new Agent({
      id: agentId,
      sessionId: session.sessionId,
      idleTimeoutSeconds,
      idleTimeoutDisabled: disabled,
      ...(request.prompt !== undefined ? { firstPrompt: accepted.plan.prompt } : {}),
      write: (line) => this.deliver(agentId, container, line),
      now: this.deps.now,
      onStatus: () => this.statusChanged(agentId),
      turnError: this.turnError(container.inputsId),
      maxSubscribers: this.deps.maxSubscribers,
      ...this.recorderOf(agentId),
    });
    const record: AgentRecord = {
      id: agentId,
      owner: caller.owner,
      sessionId: session.sessionId,
      runId: accepted.runId,
      inputsId: container.inputsId,
      container: container.containerId,
      workdir: accepted.plan.workdir,
      persistent: session.persistent,
      idleTimeoutSeconds,
      idleTimeoutDisabled: disabled,
      warmUpResults: accepted.pooled?.warmUpResults ?? 0,
      ...agent.progress(),
      createdAt: new Date(agent.createdAtMs).toISOString(),
    };
    this.writeRecord(agentId, 'writing the agent\'s record', (store) => store.insert(record));
    // Answered once its record is in the store: with several nodes, the next request for it may reach another
    // node, which finds where it runs from that record (a SQLite store has written it already).
    const recorded = this.writes.settled(agentId, 2_000);
    // The agent holds its container slot until its container is gone.
    const ended = container.monitor(agent).finally(() => accepted.slot.release());
    this.entries.set(agentId, { agent, container, ended, owner: caller.owner, ...(session.saveProgress ? { saveSession: session.saveProgress } : {}) });
    this.reportStatuses();
    if (disabled) {
      this.deps.log.warn({ agentId }, 'agent spawned with disable_idle_timeout: it runs until DELETE /agents/:id or service shutdown');
    }
    this.deps.log.info({ agentId, sessionId: session.sessionId, containerId: container.containerId, pooled: accepted.pooled !== undefined }, 'agent spawned');
    // A pooled engine answered its initialize request while it waited; a new one is asked now.
    // An engine gone already ends the agent by its exit; one that does not read is stopped by deliver().
    if (accepted.pooled) agent.markReady();
    else this.deliver(agentId, container, READY_REQUEST).catch(() => undefined);
    await recorded;
    return agent.snapshot();
  }

  /**
   * Start-up: the agents a previous process left are found again (agent-restore.ts). Running ones are
   * attached again with their snapshot, watchdog and turn in progress; the others are listed as exited,
   * with an exit_error that says why, for the retention period.
   */
  async restore(): Promise<void> {
    const { store } = this.deps;
    if (!store) return;
    const now = (this.deps.now ?? Date.now)();
    await store.removeExitedBefore(new Date(now - this.deps.exitedRetentionMs).toISOString());
    // Agents that had exited (a graceful stop, their idle timeout) are listed as they ended, until DELETE
    // or the retention passes: a client that comes back learns why its agent is gone.
    for (const record of await store.exited()) {
      const exited = { reason: record.exitError ?? 'agent: the engine exited', atMs: Date.parse(record.exitedAt ?? record.lastActivityAt) };
      const agent = this.restoredAgent(record, { turnsCompleted: record.turnsCompleted, turnsEnded: record.turnsEnded, currentTurn: undefined, exited }, () => Promise.reject(new Error('the agent has exited')));
      this.entries.set(record.id, { agent, container: undefined, ended: Promise.resolve(), owner: record.owner });
    }
    let resumed = 0;
    for (const record of await store.live()) {
      const found = await findAgentAgain({ container: this.deps.container, sessions: this.deps.sessions, log: this.deps.log }, record).catch(
        (error: unknown) => ({ kind: 'gone' as const, exitError: `agent: it could not be followed again after the restart: ${(error as Error).message}` }),
      );
      const agent = this.restoredAgent(
        record,
        found.kind === 'running'
          ? { turnsCompleted: found.turnsCompleted, turnsEnded: found.turnsEnded, currentTurn: found.currentTurn }
          : { turnsCompleted: record.turnsCompleted, turnsEnded: record.turnsEnded, currentTurn: undefined },
        (line) => (found.kind === 'running' ? this.deliver(record.id, found.container, line) : Promise.reject(new Error('the agent is gone'))),
      );
      if (found.kind === 'gone') {
        this.deps.container.gateway.grants.revoke(record.inputsId);
        this.entries.set(record.id, { agent, container: undefined, ended: Promise.resolve(), owner: record.owner });
        agent.exit(found.exitError);
        this.deps.log.warn({ agentId: record.id, reason: found.exitError }, 'an agent of the previous process is gone');
        continue;
      }
      const slot = this.deps.slots ? new RunSlot(this.deps.slots, record.owner) : undefined;
      try {
        await slot?.acquire();
      } catch {
        // The container exists whatever the limits say; it is followed uncounted.
      }
      const ended = found.container.monitor(agent).finally(() => slot?.release());
      this.entries.set(record.id, { agent, container: found.container, ended, owner: record.owner });
      this.statusChanged(record.id);
      resumed += 1;
    }
    if (resumed > 0) this.deps.log.info({ count: resumed }, 'following again the agents the previous process left running');
    this.reportStatuses();
  }

  /** An agent of a previous process, with its record's options and the progress found for it. */
  private restoredAgent(record: AgentRecord, progress: Pick<NonNullable<AgentOptions['restored']>, 'turnsCompleted' | 'turnsEnded' | 'currentTurn' | 'exited'>, write: AgentOptions['write']): Agent {
    return new Agent({
      id: record.id,
      sessionId: record.sessionId,
      idleTimeoutSeconds: record.idleTimeoutSeconds,
      idleTimeoutDisabled: record.idleTimeoutDisabled,
      write,
      now: this.deps.now,
      onStatus: () => this.statusChanged(record.id),
      turnError: this.turnError(record.inputsId),
      maxSubscribers: this.deps.maxSubscribers,
      ...this.recorderOf(record.id),
      restored: { createdAtMs: Date.parse(record.createdAt), lastActivityMs: Date.parse(record.lastActivityAt), ...progress },
    });
  }

  /** Whether this process runs (or keeps the exited record of) agent `id`, whoever its caller. */
  holds(id: string): boolean {
    return this.entries.has(id);
  }

  list(caller: Caller): AgentSnapshot[] {
    return [...this.entries.values()]
      .filter((entry) => entry.owner === caller.owner)
      .map((entry) => entry.agent.snapshot()).sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  get(id: string, caller: Caller): AgentSnapshot {
    return this.entry(id, caller).agent.snapshot();
  }

  /** Answers once the engine has the turn; a turn it does not read in time is a 504, and the agent is stopped. */
  async send(id: string, prompt: string, caller: Caller): Promise<{ turn_id: string }> {
    const { agent } = this.entry(id, caller);
    if (this.refusingTurns) throw errors.shuttingDown();
    const text = checkPrompt(prompt, this.deps.maxPromptBytes);
    // A caller whose daily model budget is spent is told so at once, not by a turn that fails. Asked first: it
    // may wait for the usage store, and nothing may come between the checks below and the send.
    const admission = await this.deps.budgets?.admission(caller.owner, (this.deps.now ?? Date.now)());
    if (this.refusingTurns) throw errors.shuttingDown();
    agent.checkCanSend();
    if (admission && !admission.ok) throw errors.budgetExceeded(admission.message);
    const turn = agent.send(text);
    await turn.delivered;
    return { turn_id: turn.id };
  }

  /**
   * Writes one line to an agent's engine. An engine that does not read it within SERVICE_AGENT_SEND_TIMEOUT
   * is stopped or stuck (code in its container can SIGSTOP or ptrace it): the agent is stopped with an
   * exit_error saying so, and the send fails with a 504. An input already closed means the engine is
   * ending: its exit ends the agent, the send is a 410.
   */
  private async deliver(agentId: string, container: AgentContainer, line: string): Promise<void> {
    try {
      await container.write(line, this.deps.sendTimeoutMs);
    } catch (error) {
      if (error instanceof TurnNotTaken) {
        const timeout = formatDuration(error.timeoutMs);
        this.deps.log.warn({ agentId, timeout }, 'an agent\'s engine did not read its input in time; stopping the agent');
        void this.stopEntry(agentId, EXIT_REASONS.sendTimeout(timeout));
        throw errors.agentSendTimeout(agentId, timeout);
      }
      throw errors.agentExited(agentId, `its engine's input is closed: ${(error as Error).message}`);
    }
  }

  /**
   * The agent's events for one stream: with `afterId` (Last-Event-ID), first those kept after it, then live
   * ones, none twice (core/events/replay.ts); without, live ones only. close() ends it (the client left).
   */
  follow(id: string, caller: Caller, afterId: number | undefined): AgentEventStream {
    const subscription = this.entry(id, caller).agent.subscribe();
    const { events } = this.deps;
    if (!events) return { events: subscription, close: () => subscription.close() };
    return {
      events: replayThenLive<AgentEvent>({
        log: events,
        stream: eventStreams.agent(id),
        afterId,
        live: subscription,
        fromLog: (stored) => ({ ...(stored.data as unknown as AgentEvent), id: stored.id }),
        // A late subscriber of an exited agent is handed its exited event again; a replay may have sent it.
        once: ['exited'],
        now: this.deps.now,
      }),
      close: () => subscription.close(),
    };
  }

  /** The agent's writer to the event log, as Agent options (none without a log). */
  private recorderOf(agentId: string): Pick<AgentOptions, 'recorder'> {
    const { events } = this.deps;
    if (!events) return {};
    const recorder = new StreamRecorder(events, eventStreams.agent(agentId), (error) =>
      this.deps.log.error({ err: error, agentId }, 'an agent event could not be kept in the event log; it is sent live without an id'),
    );
    return { recorder };
  }

  /** A forgotten agent's events go with it. */
  private forgetEvents(agentId: string): void {
    this.deps.events?.removeStream(eventStreams.agent(agentId)).catch((error: unknown) => this.deps.log.warn({ err: error, agentId }, 'an agent\'s events could not be removed from the event log'));
  }

  /** DELETE: stops a live agent (its record stays for the retention, as exited); forgets an exited one. */
  async remove(id: string, caller: Caller): Promise<void> {
    const entry = this.entry(id, caller);
    if (entry.agent.status === 'exited') {
      await entry.ended;
      this.entries.delete(id);
      this.writeRecord(id, 'removing the agent\'s record', (store) => store.remove(id));
      this.forgetEvents(id);
      this.reportStatuses();
      return;
    }
    await this.stopEntry(id, EXIT_REASONS.deleted);
  }

  /** Shutdown begun: new turns are refused (new agents are refused by the run service). */
  stopAccepting(): void {
    this.refusingTurns = true;
  }

  /** The ids of the agents generating a turn now (shutdown progress). */
  generatingAgents(): string[] {
    return [...this.entries.values()].filter((entry) => entry.agent.status === 'generating').map((entry) => entry.agent.id);
  }

  /** Shutdown with `drain`: resolves once no agent is generating a turn. */
  async turnsDone(pollMs = 100): Promise<void> {
    while (this.generatingAgents().length > 0) await new Promise((resolve) => setTimeout(resolve, pollMs));
  }

  /**
   * Shutdown with `detach`: every agent's container goes on running; Berth only lets go of its attach
   * connection. Subscribers get an error event saying so, then their streams close.
   */
  async detach(): Promise<void> {
    this.closed = true;
    this.watchdog.stop();
    for (const entry of this.entries.values()) {
      if (entry.agent.status === 'exited') continue;
      entry.agent.detach('the service is restarting; this agent keeps running and can be used again once the service is back');
      entry.container?.detach();
    }
    await Promise.allSettled([...this.entries.values()].map((entry) => entry.ended));
    // The records as they are now are what the next start follows again.
    await this.flushRecords();
  }

  /** Shutdown: no more spawns, every live agent stopped and its container removed. */
  async close(): Promise<void> {
    this.closed = true;
    this.watchdog.stop();
    await Promise.allSettled([...this.entries.keys()].map((id) => this.stopEntry(id, EXIT_REASONS.shutdown)));
    await this.flushRecords();
  }

  /** At a stop: the records' queued writes, waited for 10 s at most (a store that hangs must not hang the stop). */
  private async flushRecords(): Promise<void> {
    if (!(await this.writes.flush())) this.deps.log.error('the agent store did not take every write in time: the next start may find some agents as they were before');
  }

  private stopEntry(id: string, reason: string): Promise<void> {
    const entry = this.entries.get(id);
    if (!entry) return Promise.resolve();
    if (entry.agent.status === 'exited') return entry.ended;
    entry.stopping ??= (entry.container?.stop(reason) ?? Promise.resolve()).catch((error: unknown) => {
      this.deps.log.error({ err: error, agentId: id }, 'agent stop failed');
    });
    this.deps.log.info({ agentId: id, reason }, 'stopping agent');
    return entry.stopping;
  }

  /**
   * A failed turn during which the model gateway refused one of the agent's requests for a budget ends with
   * the error naming that limit (as a run's does); other failures keep the engine's message.
   */
  private turnError(grantId: string): (engineMessage: string, turnStartedMs: number) => string {
    return (engineMessage, turnStartedMs) => {
      const refusal = this.deps.container.gateway.grants.refusalOf(grantId);
      return refusal && refusal.at >= turnStartedMs ? errors.budgetExceeded(refusal.message).message : engineMessage;
    };
  }

  /** The caller's agent; another caller's is as absent as one that never existed (404). */
  private entry(id: string, caller: Caller): Entry {
    const entry = this.entries.get(id);
    if (!entry || entry.owner !== caller.owner) throw errors.agentNotFound(id);
    return entry;
  }

  private idleTimeoutOf(seconds: number | undefined): number {
    if (seconds === undefined || seconds === 0) return this.deps.defaultIdleTimeoutSeconds;
    if (!Number.isInteger(seconds) || seconds < 0) {
      throw errors.invalid('idle_timeout_seconds: must be a whole number of seconds ≥ 0 (0 keeps the default)');
    }
    return seconds;
  }

  /** After every status change of an agent: its durable record and the metrics. */
  private statusChanged(id: string): void {
    const entry = this.entries.get(id);
    if (entry) {
      const progress = entry.agent.progress();
      this.writeRecord(id, 'updating the agent\'s record', (store) => store.update(id, progress));
      // A turn ended (or the engine became ready): its session is saved for the other nodes, off the agent's path.
      if (entry.agent.status === 'idle') void entry.saveSession?.();
    }
    this.reportStatuses();
  }

  /**
   * Queues a write of the agent's durable record behind its earlier ones: the agent never waits for the store
   * (PostgreSQL answers after a round trip). A failed write (a full disk, a lost database) must not stop the
   * agent: it is logged; the progress is written whole again at the agent's next change.
   */
  private writeRecord(id: string, what: string, write: (store: AgentStore) => Promise<void>): void {
    const { store } = this.deps;
    if (store) this.writes.add(id, what, () => write(store));
  }

  private reportStatuses(): void {
    if (!this.deps.observer) return;
    const counts = Object.fromEntries(AGENT_STATUSES.map((status) => [status, 0])) as Record<AgentStatus, number>;
    for (const { agent } of this.entries.values()) counts[agent.status] += 1;
    this.deps.observer.statusCounts(counts);
  }
}
