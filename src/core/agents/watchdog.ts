// The idle watchdog: one periodic tick (30 s) for every agent of the registry. An idle agent whose
// last activity is older than its idle timeout is stopped; an agent stuck in starting is stopped after
// START_TIMEOUT_MS; an exited record is forgotten after the retention. The actual stop therefore happens
// between idle_timeout_seconds and idle_timeout_seconds + one tick after the last activity.
import type { Agent } from './agent.js';
import { EXIT_REASONS } from './agent-types.js';

/** A starting agent whose engine has not answered by then will not: the engine answers in about a second. */
export const START_TIMEOUT_MS = 120_000;

export interface Timers {
  /** Calls fn every ms; returns the cancel. */
  every(ms: number, fn: () => void): () => void;
}

export const realTimers: Timers = {
  every(ms, fn) {
    const handle = setInterval(fn, ms);
    handle.unref();
    return () => clearInterval(handle);
  },
};

export interface WatchdogTarget {
  agents(): Iterable<Agent>;
  /** Stops a live agent with the given exit_error. */
  stop(agent: Agent, reason: string): void;
  /** Drops an exited agent's record. */
  forget(agent: Agent): void;
}

export interface WatchdogOptions {
  readonly tickMs: number;
  readonly exitedRetentionMs: number;
  readonly now?: () => number;
  readonly timers?: Timers;
}

export class IdleWatchdog {
  private cancel: (() => void) | undefined;

  constructor(
    private readonly target: WatchdogTarget,
    private readonly options: WatchdogOptions,
  ) {}

  start(): void {
    this.cancel ??= (this.options.timers ?? realTimers).every(this.options.tickMs, () => this.tick());
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  tick(): void {
    const now = (this.options.now ?? Date.now)();
    for (const agent of [...this.target.agents()]) {
      if (agent.idleExpired(now)) this.target.stop(agent, EXIT_REASONS.idleTimeout);
      else if (agent.status === 'starting' && now - agent.createdAtMs >= START_TIMEOUT_MS) this.target.stop(agent, EXIT_REASONS.startTimeout);
      else if (agent.status === 'exited' && now - (agent.exitedAt ?? now) >= this.options.exitedRetentionMs) this.target.forget(agent);
    }
  }
}
