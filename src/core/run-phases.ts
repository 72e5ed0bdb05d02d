// Where a run's time went, phase by phase, so that a slow run explains itself in its log line and in
// /metrics. The phases follow one another; a phase a run never reached is absent.
export const RUN_PHASES = [
  /** Request checks: validation, secrets, volumes, limits. */
  'validate',
  /** The image is present, glibc-based and allowed. */
  'image_check',
  /** The session directory is created, found or copied (fork) and locked. */
  'session',
  /** Taking a pre-started engine from the pool (core/pool); a run that got one skips create and start. */
  'claim',
  /**
   * Runs with a workspace (core/runs/run-workspace.ts): it is linked, made (a new session's own) or copied
   * (a fork's), acquired with its `last_run` checkpoint, and bound at the workdir.
   */
  'workspace',
  /** Async jobs only: waiting for a free slot under SERVICE_MAX_CONCURRENT_RUNS. */
  'queue',
  /** Compose environments: the stack's images built (first run of a session's stack only). */
  'compose_build',
  /** Compose environments: the stack's network, volumes and service containers created and started. */
  'compose_start',
  /** Compose environments: waiting until every service is healthy (or running). */
  'compose_healthy',
  /** Input files written and the container created by Podman. */
  'create',
  /** Podman starts the container (runc create + start). */
  'start',
  /** From a started container to the engine's first line of output (mostly the engine's own start). */
  'first_output',
  /** From the first output to the engine's result (the turn itself: the model's answers through the gateway, the tools). */
  'result',
  /** From the result to the container's exit (from the first output when the engine gave no result). */
  'engine_exit',
  /** The container removed. */
  'remove',
] as const;

export type RunPhase = (typeof RUN_PHASES)[number];

/** Phases only some runs have: async jobs queue, runs with a compose environment bring up its stack, runs with a workspace take it. */
export const OPTIONAL_PHASES: ReadonlySet<RunPhase> = new Set(['workspace', 'queue', 'compose_build', 'compose_start', 'compose_healthy', 'result']);

/** The phases in which a run gets its container: made for it, or taken from the pool. */
export const CONTAINER_PHASES = { created: ['session', 'create', 'start'], pooled: ['claim'] } as const satisfies Record<string, readonly RunPhase[]>;

export type PhaseDurations = Partial<Record<RunPhase, number>>;

/** When a phase ran, in epoch milliseconds (for trace spans). */
export interface PhaseInterval {
  readonly phase: RunPhase;
  readonly startMs: number;
  readonly endMs: number;
}

/** performance.now() as epoch milliseconds. */
const epochMs = (now: number) => performance.timeOrigin + now;

export class RunPhases {
  private readonly durations: PhaseDurations = {};
  private readonly recorded: PhaseInterval[] = [];
  private markedAt = performance.now();
  /** When the run was accepted, in epoch milliseconds. */
  readonly startedAtMs = epochMs(this.markedAt);

  /** Runs `work` and records its duration as `phase` (also when it throws). */
  async measure<T>(phase: RunPhase, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.add(phase, started, performance.now());
    }
  }

  /** Starts a phase that ends at the next call to end() or mark() (for phases bounded by events). */
  mark(): void {
    this.markedAt = performance.now();
  }

  /** Records the time since the last mark() as `phase` and marks again. */
  end(phase: RunPhase): void {
    const now = performance.now();
    this.add(phase, this.markedAt, now);
    this.markedAt = now;
  }

  has(phase: RunPhase): boolean {
    return this.durations[phase] !== undefined;
  }

  /** Milliseconds per phase, in phase order, rounded to 0.1 ms. */
  toJSON(): PhaseDurations {
    const ordered: PhaseDurations = {};
    for (const phase of RUN_PHASES) {
      const ms = this.durations[phase];
      if (ms !== undefined) ordered[phase] = Math.round(ms * 10) / 10;
    }
    return ordered;
  }

  /** Every phase as it ran, in order. */
  intervals(): readonly PhaseInterval[] {
    return this.recorded;
  }

  private add(phase: RunPhase, start: number, end: number): void {
    this.durations[phase] = (this.durations[phase] ?? 0) + (end - start);
    this.recorded.push({ phase, startMs: epochMs(start), endMs: epochMs(end) });
  }
}
