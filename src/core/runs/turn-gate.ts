// When a finished run's tear-down may begin without slowing another run's turn. A run answered at its
// result leaves work behind (its container's removal, its workspace's unbind and measure, its run disk), about
// 0.1 s of CPU on Podman's and Berth's side; on a 2-core host that work, started while the next run's engine
// takes its turn, made that turn 15–30 ms slower. The caller already has its answer, so the tear-down can
// wait a moment: until no turn has run for a short quiet window, at most a bounded time. When two or more
// turns run at once the host is busy anyway and the wait would only hold containers longer, so it ends.
import { setTimeout as delay } from 'node:timers/promises';

export interface TurnGateSettings {
  /** How long no turn must have run (longer than the gap between one run's answer and the next turn's start). */
  readonly quietMs: number;
  /** The longest a tear-down waits. */
  readonly maxWaitMs: number;
  readonly now?: () => number;
}

export class TurnGate {
  private turns = 0;
  private lastChangeMs: number;
  private readonly now: () => number;

  constructor(private readonly settings: TurnGateSettings) {
    this.now = settings.now ?? (() => performance.now());
    this.lastChangeMs = this.now();
  }

  /** A turn started; the function returned ends it (idempotent). */
  begin(): () => void {
    this.turns += 1;
    this.lastChangeMs = this.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.turns -= 1;
      this.lastChangeMs = this.now();
    };
  }

  get inProgress(): number {
    return this.turns;
  }

  /** Whether a tear-down may begin now. */
  open(): boolean {
    if (this.turns >= 2) return true;
    return this.turns === 0 && this.now() - this.lastChangeMs >= this.settings.quietMs;
  }

  /** Resolves once open(), or after maxWaitMs. */
  async quiet(): Promise<void> {
    const deadline = this.now() + this.settings.maxWaitMs;
    while (!this.open()) {
      const left = deadline - this.now();
      if (left <= 0) return;
      await delay(Math.min(this.settings.quietMs / 2, left));
    }
  }
}
