// The async-job use case: accept a run at once, keep it as a durable job, run it when a slot is free,
// record how it ended, and announce the end by webhook. Every status change is a compare-and-set in the
// store, so a DELETE racing a job's own end has one winner and the record never says what did not happen.
//
//   pending ──slot free──▶ running ──▶ completed | failed | crashed
//      │                      │
//      └──────── DELETE ──────┴──▶ cancelled
//   service stop: pending, running ──▶ crashed; start-up after a crash or a detach: running jobs followed
//   again (crashed only when their container is gone), pending jobs run   (docs/jobs.md)
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, errors } from '../../errors.js';
import type { RunRequest } from '../run-request.js';
import type { AcceptedRun } from '../runs/run-service.js';
import type { Job, JobChange, JobStatus, JobStore } from '../../store/jobs/job-store.js';
import type { Caller } from '../auth/caller.js';
import type { ContainerState } from '../../runtime/ports/containers.js';
import type { WebhookSender } from '../webhooks/deliverer.js';
import { jobFinishedPayload, jobListItem, jobView, type JobListItem, type JobView } from './job-view.js';
import { RunQueue } from './run-queue.js';
import { JOB_MESSAGES, outcomeChange, serviceCrash, type JobRunner } from './job-outcome.js';
import { isStorageFull } from '../../store/sqlite.js';
import type { JobEvents, JobEventStream } from './job-events.js';

/** The longest wait between two attempts to record a finished job on a full disk. */
const STORAGE_RETRY_MAX_MS = 5_000;

export { JOB_MESSAGES, type JobRunner } from './job-outcome.js';

export interface JobServiceDependencies {
  /** With `events`, the store it wraps (events.recording(store)), so that every status is an event. */
  readonly store: JobStore;
  /** Status events, replayable (job-events.ts); absent (unit tests): a stream sends the current status only. */
  readonly events?: JobEvents;
  readonly runs: JobRunner;
  /** Absent: webhook_url is recorded but nothing is sent (unit tests). */
  readonly webhooks?: WebhookSender;
  /** SERVICE_MAX_CONCURRENT_RUNS: jobs beyond it wait as pending, in submission order. */
  readonly maxConcurrentRuns: number;
  /** SERVICE_JOB_RETENTION: finished jobs older than this are deleted. */
  readonly retentionMs: number;
  readonly log: Logger;
  readonly observer?: { jobCounts(counts: Record<JobStatus, number>): void };
  /** The service's shutdown signal: once aborted, no queued job starts any more. */
  readonly shutdownSignal?: AbortSignal;
  readonly now?: () => number;
  /** Default: the retention, at most one hour, at least one second. */
  readonly pruneIntervalMs?: number;
  /** How long DELETE waits for a running job's container to be removed before answering. Default 15 s. */
  readonly cancelWaitMs?: number;
}

export interface SubmittedJob {
  readonly job_id: string;
  readonly session_id: string;
}

export interface JobListOptions {
  readonly status?: JobStatus;
  readonly limit?: number;
  readonly offset?: number;
}

export const JOB_LIST_DEFAULT_LIMIT = 50;
export const JOB_LIST_MAX_LIMIT = 500;

interface RunningJob {
  readonly controller: AbortController;
  readonly done: Promise<void>;
}

export class JobService {
  private readonly queue: RunQueue;
  /** Accepted runs of queued jobs: their sessions are held until they start or are cancelled. */
  private readonly accepted = new Map<string, AcceptedRun>();
  private readonly running = new Map<string, RunningJob>();
  /** Job tasks and webhook deliveries in flight; close() waits for the first, then stops the second. */
  private readonly jobTasks = new Set<Promise<unknown>>();
  private readonly deliveryTasks = new Set<Promise<unknown>>();
  private readonly deliveries = new AbortController();
  /** Queued jobs that will never start because the service is stopping; close() marks them crashed. */
  private readonly unstarted: string[] = [];
  private readonly now: () => number;
  private pruneTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly deps: JobServiceDependencies) {
    this.now = deps.now ?? Date.now;
    this.queue = new RunQueue(deps.maxConcurrentRuns, (id, error) => deps.log.error({ err: error, jobId: id }, 'job task failed unexpectedly'));
    deps.shutdownSignal?.addEventListener('abort', () => this.unstarted.push(...this.queue.close()), { once: true });
  }

  /**
   * Start-up: jobs a previous process left running are followed again, pending ones are queued again, owed
   * webhooks are sent, old jobs are pruned.
   */
  async start(): Promise<void> {
    const { store, log } = this.deps;
    const at = this.timestamp();
    // Jobs a previous process left running are followed again when their container is still there (running,
    // or exited meanwhile: its whole output is in Podman's log); only a job whose container is gone crashes.
    let followed = 0;
    let crashed = 0;
    for (const job of await store.withStatus('running')) {
      const found = await this.deps.runs
        .reattach({ runId: job.runId, sessionId: job.sessionId, request: job.request as RunRequest, caller: { owner: job.owner } })
        .catch((error: unknown) => {
          log.warn({ err: error, jobId: job.id }, 'a job left running by the previous process cannot be followed again');
          return undefined;
        });
      if (found) {
        followed += 1;
        void track(this.jobTasks, this.followAgain(job.id, found.accepted, found.container));
      } else if (await store.transition(job.id, ['running'], { status: 'crashed', crashInfo: serviceCrash('service_restart'), error: JOB_MESSAGES.restartedWhileRunning }, at)) {
        crashed += 1;
      }
    }
    // Jobs that had not started are accepted again, under their run and session ids, and queued in their
    // submission order; one that can no longer be accepted (its session or image gone) crashes with the reason.
    let queued = 0;
    for (const job of await store.withStatus('pending')) {
      try {
        const accepted = await this.deps.runs.acceptAgain({ runId: job.runId, sessionId: job.sessionId, request: job.request as RunRequest, caller: { owner: job.owner } });
        this.accepted.set(job.id, accepted);
        this.queue.enqueue(job.id, () => track(this.jobTasks, this.runJob(job.id)));
        queued += 1;
      } catch (error) {
        log.warn({ err: error, jobId: job.id }, 'a job left pending by the previous process cannot be accepted again');
        const reason = error instanceof BerthError ? `: ${error.message}` : '';
        if (await store.transition(job.id, ['pending'], { status: 'crashed', crashInfo: serviceCrash('service_restart'), error: `${JOB_MESSAGES.restartedWhilePending}${reason}` }, at)) crashed += 1;
      }
    }
    if (queued > 0) log.info({ count: queued }, 'running the jobs the previous process left pending');
    if (followed > 0) log.info({ count: followed }, 'following again the jobs the previous process left running');
    if (crashed > 0) log.warn({ count: crashed }, 'jobs left pending, or running without a container, by the previous process were marked crashed');
    for (const job of await store.pendingWebhooks()) this.deliver(job);
    await this.prune();
    const interval = this.deps.pruneIntervalMs ?? Math.max(1_000, Math.min(this.deps.retentionMs, 3_600_000));
    this.pruneTimer = setInterval(() => {
      this.prune().catch((error: unknown) => log.warn({ err: error }, 'pruning old jobs failed; the next pass retries'));
    }, interval);
    this.pruneTimer.unref();
    this.refreshCounts();
  }

  /** POST /run/async: validation and the session happen here, so refusals are ordinary HTTP errors. */
  async submit(request: RunRequest, caller: Caller): Promise<SubmittedJob> {
    if (this.isStopping()) throw errors.shuttingDown();
    // A job waits for its container slot while pending (runJob), instead of being refused like a sync run.
    const accepted = await this.deps.runs.accept(request, { caller, slot: 'later' });
    const id = `job-${randomUUID()}`;
    let inserted = false;
    try {
      if (this.isStopping()) throw errors.shuttingDown();
      await this.deps.store.insert({
        id,
        sessionId: accepted.session.sessionId,
        runId: accepted.runId,
        webhookUrl: accepted.plan.webhookUrl ?? null,
        request,
        owner: caller.owner,
        createdAt: this.timestamp(),
      });
      inserted = true;
      this.accepted.set(id, accepted);
      this.queue.enqueue(id, () => track(this.jobTasks, this.runJob(id)));
    } catch (error) {
      this.accepted.delete(id);
      await this.deps.runs.abandon(accepted);
      if (!inserted) throw isStorageFull(error) ? errors.storageFull('job database') : error;
      // The queue closed under us (shutdown): the stored job must not stay pending.
      await this.deps.store.transition(id, ['pending'], { status: 'crashed', crashInfo: serviceCrash('service_stop'), error: JOB_MESSAGES.stoppedWhilePending }, this.timestamp());
      throw errors.shuttingDown();
    }
    this.refreshCounts();
    return { job_id: id, session_id: accepted.session.sessionId };
  }

  async get(id: string, caller: Caller): Promise<JobView> {
    return jobView(await this.ownJob(id, caller));
  }

  /** GET /jobs/:id/stream: the job's status events after `afterId`, until its final one (404: not the caller's). */
  async follow(id: string, caller: Caller, afterId: number | undefined): Promise<JobEventStream> {
    const job = await this.ownJob(id, caller);
    const { events, store } = this.deps;
    if (events) return events.follow(id, afterId, () => store.get(id));
    const at = this.timestamp();
    const only = (async function* () {
      yield { type: 'status' as const, status: job.status, at: job.updatedAt };
      yield { type: 'closed' as const, at };
    })();
    return { events: only, close: () => undefined };
  }

  async list(options: JobListOptions, caller: Caller): Promise<JobListItem[]> {
    const limit = Math.min(Math.max(1, options.limit ?? JOB_LIST_DEFAULT_LIMIT), JOB_LIST_MAX_LIMIT);
    const offset = Math.max(0, options.offset ?? 0);
    const jobs = await this.deps.store.list({ owner: caller.owner, ...(options.status ? { status: options.status } : {}), limit, offset });
    return jobs.map(jobListItem);
  }

  /** The caller's job; another caller's is as absent as one that never existed (404). */
  private async ownJob(id: string, caller: Caller): Promise<Job> {
    const job = await this.deps.store.get(id);
    if (!job || job.owner !== caller.owner) throw errors.jobNotFound(id);
    return job;
  }

  /** DELETE /jobs/:id: pending or running → cancelled; answers once the container is gone (or after cancelWaitMs). */
  async cancel(id: string, caller: Caller): Promise<{ id: string; status: 'cancelled' }> {
    await this.ownJob(id, caller);
    const cancelled = await this.deps.store.transition(id, ['pending', 'running'], { status: 'cancelled', error: JOB_MESSAGES.cancelled }, this.timestamp());
    if (!cancelled) {
      const job = await this.deps.store.get(id);
      if (!job) throw errors.jobNotFound(id);
      throw errors.jobFinished(id, job.status);
    }
    if (this.queue.remove(id)) await this.releaseQueued(id);
    const run = this.running.get(id);
    if (run) {
      run.controller.abort();
      let timer: NodeJS.Timeout | undefined;
      const waited = await Promise.race([
        run.done.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), this.deps.cancelWaitMs ?? 15_000);
        }),
      ]);
      clearTimeout(timer);
      if (!waited) this.deps.log.warn({ jobId: id }, 'cancelled job: its container is still being removed');
    }
    this.afterFinish(cancelled);
    return { id, status: 'cancelled' };
  }

  /**
   * Shutdown (after the runs were aborted by the shutdown signal): queued jobs become crashed, running
   * jobs record how they ended, webhook deliveries stop (owed ones are sent again at the next start).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pruneTimer);
    const at = this.timestamp();
    this.unstarted.push(...this.queue.close());
    for (const id of this.unstarted.splice(0)) {
      await this.releaseQueued(id);
      await this.deps.store.transition(id, ['pending'], { status: 'crashed', crashInfo: serviceCrash('service_stop'), error: JOB_MESSAGES.stoppedWhilePending }, at);
    }
    for (const run of this.running.values()) run.controller.abort();
    await Promise.allSettled([...this.jobTasks]);
    this.deliveries.abort();
    await Promise.allSettled([...this.deliveryTasks]);
  }

  /** The ids of the jobs queued or running now (shutdown progress). */
  inFlightJobs(): string[] {
    return [...this.accepted.keys(), ...this.running.keys()];
  }

  /** Shutdown with `drain`: resolves once no job is queued or running (new ones are refused by then). */
  async idle(pollMs = 100): Promise<void> {
    while (this.accepted.size > 0 || this.running.size > 0) await new Promise((resolve) => setTimeout(resolve, pollMs));
  }

  /**
   * Shutdown with `detach`: nothing is cancelled. Running jobs stay `running` (their containers go on and
   * the next start follows them), queued ones stay `pending` (the next start runs them); webhook deliveries
   * stop (owed ones are sent by the next start).
   */
  async detach(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pruneTimer);
    const left = this.queue.close();
    if (left.length > 0) this.deps.log.info({ count: left.length }, 'jobs left pending for the next start');
    if (this.running.size > 0) this.deps.log.info({ count: this.running.size }, 'jobs left running for the next start to follow');
    this.deliveries.abort();
    await Promise.allSettled([...this.deliveryTasks]);
  }

  /** A job of a previous process whose container is still there: followed to its end like any job. */
  private async followAgain(id: string, accepted: AcceptedRun, container: ContainerState): Promise<void> {
    const controller = new AbortController();
    let finish!: () => void;
    this.running.set(id, { controller, done: new Promise<void>((resolve) => (finish = resolve)) });
    try {
      await this.runToEnd(id, accepted, controller.signal, container);
    } finally {
      this.running.delete(id);
      finish();
    }
  }

  private async runJob(id: string): Promise<void> {
    const accepted = this.accepted.get(id);
    this.accepted.delete(id);
    if (!accepted) return;
    const controller = new AbortController();
    let finish!: () => void;
    // Registered before the job is marked running, so a DELETE in between finds something to abort.
    this.running.set(id, { controller, done: new Promise<void>((resolve) => (finish = resolve)) });
    try {
      // Still pending until a container slot is free (SERVICE_MAX_CONTAINERS, _PER_CALLER); a cancel or
      // the shutdown ends the wait and is handled just below.
      await accepted.slot.wait(controller.signal).catch(() => undefined);
      const started = await this.deps.store.transition(id, ['pending'], { status: 'running' }, this.timestamp());
      if (!started || controller.signal.aborted || this.isStopping()) {
        await this.deps.runs.abandon(accepted);
        if (started && this.isStopping()) {
          await this.conclude(id, { status: 'crashed', crashInfo: serviceCrash('service_stop'), error: JOB_MESSAGES.stoppedWhilePending });
        }
        return;
      }
      this.refreshCounts();
      await this.runToEnd(id, accepted, controller.signal);
    } finally {
      this.running.delete(id);
      finish();
    }
  }

  /** Executes (or, with `container`, follows again) a running job's run and concludes the job from its outcome. */
  private async runToEnd(id: string, accepted: AcceptedRun, signal: AbortSignal, container?: ContainerState): Promise<void> {
    let change: JobChange;
    try {
      const outcome = await this.deps.runs.execute(accepted, 'async', signal, {}, container);
      change = await outcomeChange(this.deps.runs, accepted, outcome);
    } catch (error) {
      this.deps.log.error({ err: error, jobId: id }, 'job run failed before the engine could finish');
      const message = error instanceof BerthError ? error.message : (error as Error).message;
      change = { status: 'failed', error: `run failed: ${message}` };
    }
    await this.conclude(id, change);
  }

  /** running → its final status (unless a DELETE got there first), then metrics and the webhook. */
  private async conclude(id: string, change: JobChange): Promise<void> {
    const at = this.timestamp();
    // A full disk must not lose a finished job: its result is kept here and written once space is freed
    // (a stop gives up; the next start then finds the job running with its container gone).
    for (let attempt = 0; ; attempt++) {
      try {
        const job = await this.deps.store.transition(id, ['running'], change, at);
        if (attempt > 0) this.deps.log.info({ jobId: id, attempts: attempt + 1 }, 'the job database could be written again; the job\'s result is recorded');
        if (job) this.afterFinish(job);
        return;
      } catch (error) {
        if (!isStorageFull(error) || this.isStopping()) throw error;
        if (attempt === 0) this.deps.log.error({ err: error, jobId: id }, 'the job database cannot be written (disk full); the job\'s result is kept and recorded once space is freed');
        await new Promise((resolve) => setTimeout(resolve, Math.min(STORAGE_RETRY_MAX_MS, 250 * 2 ** attempt)));
      }
    }
  }

  private afterFinish(job: Job): void {
    this.refreshCounts();
    this.deps.log.info({ jobId: job.id, status: job.status, sessionId: job.sessionId }, 'job finished');
    if (job.webhookState === 'pending') this.deliver(job);
  }

  private deliver(job: Job): void {
    const { webhooks, store, log } = this.deps;
    if (!webhooks || job.webhookUrl === null || job.finishedAt === null) return;
    const body = JSON.stringify(jobFinishedPayload(job));
    const timestamp = Math.floor(Date.parse(job.finishedAt) / 1000);
    const delivery = webhooks.deliver({ url: job.webhookUrl, body, timestamp }, this.deliveries.signal).then(async (result) => {
      if (result.outcome === 'aborted') return; // still owed: sent again at the next start
      await store.setWebhookState(job.id, result.outcome);
      if (result.outcome === 'failed') log.warn({ jobId: job.id, attempts: result.attempts, reason: result.reason }, 'webhook delivery failed');
    });
    track(this.deliveryTasks, delivery.catch((error: unknown) => log.error({ err: error, jobId: job.id }, 'webhook delivery crashed')));
  }

  private async releaseQueued(id: string): Promise<void> {
    const accepted = this.accepted.get(id);
    this.accepted.delete(id);
    if (accepted) await this.deps.runs.abandon(accepted);
  }

  private async prune(): Promise<void> {
    const cutoff = new Date(this.now() - this.deps.retentionMs).toISOString();
    const removed = await this.deps.store.deleteFinishedBefore(cutoff);
    if (removed > 0) {
      this.deps.log.info({ removed, cutoff }, 'pruned finished jobs past SERVICE_JOB_RETENTION');
      this.refreshCounts();
    }
  }

  private refreshCounts(): void {
    const { observer, store, log } = this.deps;
    if (!observer || this.closed) return;
    store.countByStatus().then(
      (counts) => observer.jobCounts(counts),
      (error: unknown) => log.warn({ err: error }, 'counting jobs for metrics failed'),
    );
  }

  private isStopping(): boolean {
    return this.closed || this.deps.shutdownSignal?.aborted === true;
  }

  private timestamp(): string {
    return new Date(this.now()).toISOString();
  }
}

function track<T>(tasks: Set<Promise<unknown>>, task: Promise<T>): Promise<T> {
  tasks.add(task);
  void task.finally(() => tasks.delete(task)).catch(() => undefined);
  return task;
}
