// Async jobs across the nodes of one database (issue 26; docs/jobs.md "Several nodes"): the node's share of the
// shared queue. It holds at most `slots` jobs at once (SERVICE_MAX_CONCURRENT_RUNS, what the in-process queue
// bounds on a single node) and, whenever it has a free slot, claims the oldest claimable jobs from the store
// (SKIP LOCKED: each job by one node). It is woken by the queue's notifications (LISTEN/NOTIFY), by a slot
// freed here, and by a slow poll (the safety net for a notification lost with its connection). Every wake-up
// that concerns this node also runs `reconcile`, which lets the job service drop what it holds for jobs that
// changed elsewhere (claimed by another node, cancelled, declared lost).
import type { Logger } from 'pino';
import type { ClaimedJob, JobWakeup, JobWakeups, SharedJobQueue } from '../../store/jobs/job-store.js';

/** The default of the safety-net poll. */
export const DISPATCH_POLL_MS = 2_000;

export interface JobDispatcherOptions {
  readonly queue: SharedJobQueue;
  readonly wakeups: JobWakeups;
  readonly slots: number;
  /** Runs a job this node claimed, to its end (or until it is handed back). */
  readonly run: (claimed: ClaimedJob) => Promise<void>;
  /** Lets go of what this node holds for jobs that changed elsewhere. */
  readonly reconcile: () => Promise<void>;
  /** A job claimed from the queue after waiting `seconds` (submission to claim, on the database's clock). */
  readonly dispatched?: (seconds: number, path: 'queued' | 'local') => void;
  readonly log: Logger;
  readonly pollMs?: number;
}

export class JobDispatcher {
  private active = 0;
  private stopped = true;
  private passing: Promise<void> | undefined;
  private again = false;
  private reconciling: Promise<void> | undefined;
  private reconcileAgain = false;
  private poller: NodeJS.Timeout | undefined;
  private readonly tasks = new Set<Promise<void>>();

  constructor(private readonly options: JobDispatcherOptions) {
    if (!Number.isInteger(options.slots) || options.slots < 1) throw new RangeError(`JobDispatcher slots must be a positive integer, not ${options.slots}`);
  }

  /** Starts listening and polling, and claims at once what is waiting. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.options.wakeups.start((wakeup) => this.woken(wakeup));
    this.poller = setInterval(() => {
      this.wake();
      this.reconcileSoon();
    }, this.options.pollMs ?? DISPATCH_POLL_MS);
    this.poller.unref();
    this.wake();
  }

  /** Claims nothing more; jobs already held run on (the job service decides their fate). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.poller);
    await this.options.wakeups.stop();
    await this.passing;
    await this.reconciling;
  }

  /** Resolves once every job this dispatcher started has returned. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.tasks]);
  }

  /**
   * Takes a slot for a job its accepting node claims at submission (then runs it with `launch`); false when
   * none is free, and the job is left to the queue.
   */
  reserve(): boolean {
    if (this.stopped || this.active >= this.options.slots) return false;
    this.active += 1;
    return true;
  }

  /** Gives back a slot reserve() took for a job that was not recorded after all. */
  unreserve(): void {
    this.active -= 1;
    this.wake();
  }

  /** Runs a job claimed at submission in the slot reserve() took. */
  launch(claimed: ClaimedJob): void {
    this.options.dispatched?.(0, 'local');
    this.track(claimed);
  }

  /** A claim pass soon (a slot was freed, a job became claimable). */
  wake(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = this.claimWhileFree().finally(() => {
      this.passing = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private woken(wakeup: JobWakeup): void {
    if (wakeup.kind === 'pending') this.wake();
    else if (wakeup.nodes.includes(this.options.queue.node)) this.reconcileSoon();
  }

  private reconcileSoon(): void {
    if (this.reconciling) {
      this.reconcileAgain = true;
      return;
    }
    this.reconciling = this.options
      .reconcile()
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'checking this node\'s jobs against the shared queue failed; the next pass retries'))
      .finally(() => {
        this.reconciling = undefined;
        if (this.reconcileAgain && !this.stopped) {
          this.reconcileAgain = false;
          this.reconcileSoon();
        }
      });
  }

  private async claimWhileFree(): Promise<void> {
    while (!this.stopped && this.active < this.options.slots) {
      const free = this.options.slots - this.active;
      let claimed: ClaimedJob[];
      try {
        // Counted before the round trip: reserve() at a submission meanwhile cannot overbook the slots.
        this.active += free;
        claimed = await this.options.queue.claim(free);
      } catch (error) {
        this.options.log.warn({ err: error }, 'claiming jobs from the shared queue failed; the next wake-up retries');
        return;
      } finally {
        this.active -= free;
      }
      for (const job of claimed) {
        this.active += 1;
        this.options.dispatched?.(job.waitedMs / 1000, 'queued');
        this.track(job);
      }
      if (claimed.length < free) return;
    }
  }

  private track(claimed: ClaimedJob): void {
    const task = Promise.resolve()
      .then(() => this.options.run(claimed))
      .catch((error: unknown) => this.options.log.error({ err: error, jobId: claimed.job.id }, 'job task failed unexpectedly'))
      .finally(() => {
        this.active -= 1;
        this.tasks.delete(task);
        this.wake();
      });
    this.tasks.add(task);
  }
}
