// One persistent agent's lifecycle, as a state machine fed by its engine's output:
//   starting --first stdout line--> idle --send--> generating --result line--> idle ... --stop/exit--> exited
// It owns the status, the turn bookkeeping and the event fan-out; it does no I/O of its own except the
// `write` it is given (the engine's stdin), so it is tested without a container.
import { randomUUID } from 'node:crypto';
import { BerthError, errors } from '../../errors.js';
import type { AgentEvent, AgentEventType, AgentSnapshot, AgentStatus } from './agent-types.js';
import { truncationMarker, type ReadLine } from './line-reader.js';
import { EventFanout, SUBSCRIBER_BUFFER, type Subscription } from './subscription.js';
import { isReadyAnswer, turnLine } from '../../engine/stream-json-input.js';
import type { StreamRecorder } from '../events/stream-recorder.js';


export interface AgentOptions {
  readonly id: string;
  readonly sessionId: string;
  readonly idleTimeoutSeconds: number;
  readonly idleTimeoutDisabled: boolean;
  /** Sent as the first turn as soon as the engine is ready. */
  readonly firstPrompt?: string;
  /** Writes one line to the engine's stdin; settles when the engine has it (or it failed, or timed out). */
  readonly write: (line: string) => Promise<void>;
  readonly now?: () => number;
  readonly newTurnId?: () => string;
  readonly subscriberBuffer?: number;
  /** Event streams one agent serves at once (SERVICE_AGENT_MAX_SUBSCRIBERS); beyond it subscribe() is a 429. */
  readonly maxSubscribers?: number;
  /**
   * The agent's writer to the event log: every event is appended first and delivered with its id, so a
   * client can reconnect with Last-Event-ID (core/events/replay.ts). Absent: events are delivered at once,
   * without ids (unit tests).
   */
  readonly recorder?: StreamRecorder;
  /** Called after every status change (metrics, the durable record). */
  readonly onStatus?: () => void;
  /**
   * The error a failed turn ends with, from the engine's own message and the time the turn started (the
   * service names the budget that stopped it, when the model gateway refused one of the turn's requests).
   */
  readonly turnError?: (engineMessage: string, turnStartedMs: number) => string;
  /**
   * An agent a previous process spawned, found again after a restart: its times and counts, and the turn it
   * was generating (it goes on generating it until the engine's result line).
   */
  readonly restored?: {
    readonly createdAtMs: number;
    readonly lastActivityMs: number;
    readonly turnsCompleted: number;
    readonly turnsEnded: number;
    readonly currentTurn: string | undefined;
    /** It had exited before the restart: how, and when (shown as it was, never exited again). */
    readonly exited?: { readonly reason: string; readonly atMs: number };
  };
}

/** An agent's durable state (store/agents), written after every status change. */
export interface AgentProgressView {
  readonly status: AgentStatus;
  readonly currentTurn: string | null;
  readonly turnsCompleted: number;
  readonly turnsEnded: number;
  readonly exitError: string | null;
  readonly lastActivityAt: string;
  readonly exitedAt: string | null;
}

/** A turn the agent accepted: its id at once, and whether the engine got it (rejects when not). */
export interface AcceptedTurn {
  readonly id: string;
  readonly delivered: Promise<void>;
}

export type TurnResult = { readonly failed: false } | { readonly failed: true; readonly message: string };

/** Whether a stdout line is the engine's end-of-turn `result` line, and how the turn ended. */
export function turnResultOf(line: ReadLine): TurnResult | undefined {
  if (line.kind === 'truncated') {
    if (!line.resultMark) return undefined;
    return line.errorMark ? { failed: true, message: 'turn failed (its result line was truncated)' } : { failed: false };
  }
  // The engine puts `type` late in its result line; the substring test keeps JSON.parse off other lines.
  if (!line.text.includes('"result"')) return undefined;
  try {
    const parsed = JSON.parse(line.text) as { type?: unknown; is_error?: unknown; result?: unknown; subtype?: unknown };
    if (parsed.type !== 'result') return undefined;
    if (parsed.is_error !== true) return { failed: false };
    const message = typeof parsed.result === 'string' && parsed.result !== '' ? parsed.result : `turn failed (${String(parsed.subtype ?? 'error')})`;
    return { failed: true, message };
  } catch {
    return undefined;
  }
}

export class Agent {
  readonly id: string;
  readonly sessionId: string;
  readonly createdAtMs: number;
  private statusValue: AgentStatus = 'starting';
  private lastActivityMs: number;
  private turnsCompleted = 0;
  /** Turns that reached their result line, failed ones included. */
  private turnsEnded = 0;
  private currentTurn: string | undefined;
  /** When the current turn was sent (for turnError). */
  private turnStartedMs = 0;
  private lastTurn: string | undefined;
  private exitErrorValue: string | undefined;
  private exitedAtMs: number | undefined;
  /** The exited event once the log gave it its id (recorder only). */
  private exitedEvent: AgentEvent | undefined;
  private readonly fanout: EventFanout;
  private readonly now: () => number;
  private readonly newTurnId: () => string;

  constructor(private readonly options: AgentOptions) {
    this.id = options.id;
    this.sessionId = options.sessionId;
    this.now = options.now ?? Date.now;
    this.newTurnId = options.newTurnId ?? (() => `turn-${randomUUID()}`);
    this.createdAtMs = this.now();
    this.lastActivityMs = this.createdAtMs;
    this.fanout = new EventFanout(options.subscriberBuffer ?? SUBSCRIBER_BUFFER);
    const { restored } = options;
    if (restored) {
      this.createdAtMs = restored.createdAtMs;
      this.lastActivityMs = restored.lastActivityMs;
      this.turnsCompleted = restored.turnsCompleted;
      this.turnsEnded = restored.turnsEnded;
      this.currentTurn = restored.currentTurn;
      this.turnStartedMs = restored.lastActivityMs;
      this.lastTurn = restored.currentTurn;
      this.statusValue = restored.currentTurn === undefined ? 'idle' : 'generating';
      if (restored.exited) {
        this.statusValue = 'exited';
        this.exitErrorValue = restored.exited.reason;
        this.exitedAtMs = restored.exited.atMs;
        this.fanout.finish(this.finalEvents());
      }
    }
  }

  progress(): AgentProgressView {
    return {
      status: this.statusValue,
      currentTurn: this.currentTurn ?? null,
      turnsCompleted: this.turnsCompleted,
      turnsEnded: this.turnsEnded,
      exitError: this.exitErrorValue ?? null,
      lastActivityAt: new Date(this.lastActivityMs).toISOString(),
      exitedAt: this.exitedAtMs === undefined ? null : new Date(this.exitedAtMs).toISOString(),
    };
  }

  get status(): AgentStatus {
    return this.statusValue;
  }

  get exitError(): string | undefined {
    return this.exitErrorValue;
  }

  get exitedAt(): number | undefined {
    return this.exitedAtMs;
  }

  get subscriberCount(): number {
    return this.fanout.count;
  }

  snapshot(): AgentSnapshot {
    return {
      id: this.id,
      session_id: this.sessionId,
      status: this.statusValue,
      created_at: new Date(this.createdAtMs).toISOString(),
      last_activity_at: new Date(this.lastActivityMs).toISOString(),
      idle_timeout_seconds: this.options.idleTimeoutSeconds,
      turns_completed: this.turnsCompleted,
      ...(this.options.idleTimeoutDisabled ? { idle_timeout_disabled: true as const } : {}),
      ...(this.exitErrorValue !== undefined ? { exit_error: this.exitErrorValue } : {}),
    };
  }

  /** A new subscriber; an exited agent's subscription holds only its exited and closed events. */
  subscribe(): Subscription {
    const max = this.options.maxSubscribers ?? Number.POSITIVE_INFINITY;
    if (this.fanout.count >= max) throw errors.tooManySubscribers(this.id, max);
    const subscription = this.fanout.subscribe();
    if (this.statusValue !== 'exited') return subscription;
    // Once the exited event is recorded (and so has its id), or at once without a recorder.
    const { recorder } = this.options;
    if (recorder) recorder.after(() => subscription.finish(this.finalEvents()));
    else subscription.finish(this.finalEvents());
    return subscription;
  }

  /**
   * Accepts a turn, or refuses it by status: 503 starting, 409 generating, 410 exited. The agent is
   * generating from here; `delivered` says whether the engine got the turn. When it did not (its input
   * closed because it is ending, or not read in time), an error event says so, and the agent ends by the
   * engine's exit or by whoever gave `write` (the service stops an engine that does not read).
   */
  send(prompt: string): AcceptedTurn {
    this.checkCanSend();
    const turnId = this.newTurnId();
    this.currentTurn = turnId;
    this.lastTurn = turnId;
    this.lastActivityMs = this.now();
    this.turnStartedMs = this.lastActivityMs;
    this.setStatus('generating');
    this.emit('turn_start');
    let writing: Promise<void>;
    try {
      writing = this.options.write(turnLine(prompt));
    } catch (error) {
      writing = Promise.reject(error);
    }
    const delivered = writing.catch((error: unknown) => {
      if (this.statusValue !== 'exited') this.emit('error', `could not send the turn to the engine: ${(error as Error).message}`);
      throw error;
    });
    return { id: turnId, delivered };
  }

  checkCanSend(): void {
    const refusal = this.refusal();
    if (refusal) throw refusal;
  }

  stdout(line: ReadLine): void {
    if (this.statusValue === 'exited') return;
    if (this.statusValue === 'starting') {
      if (!(line.kind === 'line' && isReadyAnswer(line.text))) this.emit('output', this.contentOf(line));
      this.markReady();
      return;
    }
    this.emit('output', this.contentOf(line));
    if (this.statusValue !== 'generating') return;
    const result = turnResultOf(line);
    if (!result) return;
    this.turnsEnded += 1;
    if (result.failed) this.emit('error', this.options.turnError?.(result.message, this.turnStartedMs) ?? result.message);
    else {
      this.turnsCompleted += 1;
      this.emit('turn_end');
    }
    this.currentTurn = undefined;
    this.lastActivityMs = this.now();
    this.setStatus('idle');
  }

  /**
   * The engine is ready for turns (its first stdout line, or its handshake done in the pool): idle, and the
   * first prompt sent when there is one.
   */
  markReady(): void {
    if (this.statusValue !== 'starting') return;
    this.setStatus('idle');
    // Nobody waits for the first turn's delivery: a failure is an error event, and the agent's end.
    if (this.options.firstPrompt !== undefined) this.send(this.options.firstPrompt).delivered.catch(() => undefined);
  }

  stderr(line: ReadLine): void {
    if (this.statusValue === 'exited') return;
    this.emit('error', line.kind === 'line' ? line.text : truncationMarker(line.bytes));
  }

  /** The engine is gone (or being stopped): final exited event, then every subscription closes. */
  exit(reason: string): void {
    if (this.statusValue === 'exited') return;
    this.exitErrorValue = reason;
    this.exitedAtMs = this.now();
    this.currentTurn = undefined;
    this.setStatus('exited');
    const [exited, closed] = this.finalEvents();
    const { recorder } = this.options;
    if (!recorder) return this.fanout.finish([exited!, closed!]);
    recorder.record(exited!, (stored) => {
      this.exitedEvent = stored;
      this.fanout.finish([stored, closed!]);
    });
  }

  /** The service lets go of the agent without stopping it (shutdown with detach): subscribers are told and closed. */
  detach(reason: string): void {
    if (this.statusValue === 'exited') return;
    const at = new Date(this.now()).toISOString();
    // Not recorded: it is about these connections, not the agent, which goes on.
    const notice: AgentEvent[] = [
      { type: 'error', ...(this.currentTurn ? { turn_id: this.currentTurn } : {}), content: reason, at },
      { type: 'closed', at },
    ];
    if (this.options.recorder) this.options.recorder.after(() => this.fanout.finish(notice));
    else this.fanout.finish(notice);
  }

  /** Whether the idle watchdog should stop this agent at `nowMs`. */
  idleExpired(nowMs: number): boolean {
    return (
      this.statusValue === 'idle' &&
      !this.options.idleTimeoutDisabled &&
      nowMs - this.lastActivityMs >= this.options.idleTimeoutSeconds * 1000
    );
  }

  private refusal(): BerthError | undefined {
    switch (this.statusValue) {
      case 'starting':
        return errors.agentNotReady(this.id);
      case 'generating':
        return errors.agentBusy(this.id);
      case 'exited':
        return errors.agentExited(this.id, this.exitErrorValue ?? 'stopped');
      case 'idle':
        return undefined;
    }
  }

  private contentOf(line: ReadLine): string {
    return line.kind === 'line' ? line.text : truncationMarker(line.bytes);
  }

  private finalEvents(): AgentEvent[] {
    const at = new Date(this.exitedAtMs ?? this.now()).toISOString();
    return [
      this.exitedEvent ?? { type: 'exited', ...(this.lastTurn ? { turn_id: this.lastTurn } : {}), content: this.exitErrorValue ?? '', at },
      { type: 'closed', at },
    ];
  }

  private emit(type: AgentEventType, content?: string): void {
    const event: AgentEvent = {
      type,
      ...(this.currentTurn ? { turn_id: this.currentTurn } : {}),
      ...(content !== undefined ? { content } : {}),
      at: new Date(this.now()).toISOString(),
    };
    if (this.options.recorder) this.options.recorder.record(event, (stored) => this.fanout.publish(stored));
    else this.fanout.publish(event);
  }

  private setStatus(status: AgentStatus): void {
    this.statusValue = status;
    this.options.onStatus?.();
  }
}
