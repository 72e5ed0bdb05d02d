// When the pool of pre-started engines starts engines, and how many: all it lacks at once, after claims
// pause (and only once the host's CPUs were idle enough), again a while after a start failed, one for a
// run that finds none to wait for; and when a ready engine is too old to hand out. The engines themselves
// (their start, claim and removal) are engine-pool.ts's; this module only counts and keeps time, so that it
// is tested with fake timers and a fake CPU meter (test/unit/pool-refill-schedule.test.ts).
import type { CpuMeter } from '../../runtime/host-cpu.js';

export interface PoolSettings {
  /** Engines kept ready (SERVICE_POOL_SIZE); 0 turns the pool off. */
  readonly size: number;
  /** A pooled engine older than this is replaced (SERVICE_POOL_MAX_AGE). */
  readonly maxAgeMs: number;
  /** How long claims must pause before the pool starts the engines it lacks (SERVICE_POOL_REFILL_PAUSE). */
  readonly refillPauseMs: number;
}

/** The pool's engines as the schedule counts them. */
export interface PoolCounts {
  /** Started, warmed up and not claimed. */
  readonly ready: number;
  /** Being started now. */
  readonly starting: number;
  /** Claims waiting for an engine being started (never more than `starting`). */
  readonly waiting: number;
}

/** Calls `run` after `ms` without keeping the process alive; the answer cancels it. */
export type Timer = (run: () => void, ms: number) => () => void;

const unrefTimer: Timer = (run, ms) => {
  const timer = setTimeout(run, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

export interface RefillScheduleDependencies {
  readonly settings: PoolSettings;
  /** How busy the host's CPUs were (afterClaim). */
  readonly cpu: CpuMeter;
  counts(): PoolCounts;
  /** Starts this many engines at the pool's low CPU weight. */
  start(count: number): void;
  readonly timer?: Timer;
}

/** Wait before trying again after a refill failed (image missing, Podman down, no free slot…). */
export const RETRY_MS = 5_000;

/**
 * The pool refills after a pause of claims only if the host's CPUs were idle at least half of that pause:
 * under a sustained load (runs at concurrency 8 on 2 cores) a refill only competed with the runs at work,
 * and runs then waited for its engines (the soak's p95 rose from 6 to 10 s, or its throughput fell by a
 * tenth when those starts got the runs' weight). Until the host is quieter, a run that finds no engine
 * starts its own, as without a pool.
 */
export const REFILL_BUSY_LIMIT = 0.5;

/**
 * How many busy pauses in a row, with no claim meanwhile, postpone a refill (ten: about 5 s at the default
 * pause). A claim starts the count again, so a sustained load of runs keeps postponing it; a host kept busy
 * by other work gets its pool back.
 */
export const REFILL_MAX_POSTPONED = 10;

export class RefillSchedule {
  private closed = false;
  private readonly timer: Timer;
  /** Cancels the retry after a failed start, while one is due. */
  private cancelRetry: (() => void) | undefined;
  /** Cancels the refill waiting for claims to pause, while one waits. */
  private cancelQuiet: (() => void) | undefined;

  constructor(private readonly deps: RefillScheduleDependencies) {
    this.timer = deps.timer ?? unrefTimer;
  }

  /**
   * Starts as many engines as the pool lacks, at once: a pool that refills one by one falls behind runs
   * that follow each other (an engine takes longer to start than a pooled run to finish). The work is
   * the same as without a pool, one engine start per run, only done ahead of the request.
   */
  fill(): void {
    if (this.closed) return;
    const { ready, starting } = this.deps.counts();
    const missing = this.deps.settings.size - ready - starting;
    if (missing > 0) this.deps.start(missing);
  }

  /**
   * Whether a run that found no ready engine starts one for itself: only when every start in progress is
   * promised to another claim already, and the pool is not full (a start it can wait for is ready sooner
   * than one it would begin, and a second start would only compete with it for the CPU).
   */
  startsForClaim(): boolean {
    const { ready, starting, waiting } = this.deps.counts();
    return !this.closed && starting <= waiting && ready + starting < this.deps.settings.size;
  }

  /** A ready engine older than SERVICE_POOL_MAX_AGE is not handed out but replaced. */
  expired(createdAtMs: number, nowMs: number): boolean {
    return nowMs - createdAtMs > this.deps.settings.maxAgeMs;
  }

  /**
   * Starting an engine takes about a second of CPU from Podman, runc and the engine itself; on a small
   * machine such a start, run alongside the turns of claimed engines, made each turn half again as slow
   * (sequential p50 0.33 s against 0.19 s). Runs that follow each other closely use up the engines that are
   * ready, and the pool starts new ones once claims pause for SERVICE_POOL_REFILL_PAUSE; a run that finds
   * none starts its own at once (startsForClaim). Each claim starts the pause again.
   */
  afterClaim(): void {
    this.fillWhenQuiet(0);
  }

  private fillWhenQuiet(postponed: number): void {
    if (this.closed) return;
    this.cancelQuiet?.();
    const since = this.deps.cpu.read();
    this.cancelQuiet = this.timer(() => {
      this.cancelQuiet = undefined;
      // Still busy (runs at work, a burst finishing): the refill waits for a quieter pause, but not for
      // ever once claims have stopped (other work on a shared host may keep the CPUs busy).
      if (this.deps.cpu.busySince(since) > REFILL_BUSY_LIMIT && postponed < REFILL_MAX_POSTPONED) this.fillWhenQuiet(postponed + 1);
      else this.fill();
    }, this.deps.settings.refillPauseMs);
  }

  /** A start failed or found no free slot: the pool fills again after RETRY_MS (one retry due at a time). */
  retryLater(): void {
    if (this.cancelRetry || this.closed) return;
    this.cancelRetry = this.timer(() => {
      this.cancelRetry = undefined;
      this.fill();
    }, RETRY_MS);
  }

  /** Nothing is started any more; the timers due are cancelled. */
  close(): void {
    this.closed = true;
    this.cancelRetry?.();
    this.cancelRetry = undefined;
    this.cancelQuiet?.();
    this.cancelQuiet = undefined;
  }
}
