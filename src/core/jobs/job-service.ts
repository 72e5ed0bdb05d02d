// The async-job use case: accept a run at once, keep it as a durable job, run it when a slot is free,
// record how it ended, and announce the end by webhook. Every status change is a compare-and-set in the
// store, so a DELETE racing a job's own end has one winner and the record never says what did not happen.
//
//   pending ──slot free──▶ running ──▶ completed | failed | crashed
//      │                      │
//      └──────── DELETE ──────┴──▶ cancelled
//   service stop: pending, running ──▶ crashed; start-up after a crash or a detach: running jobs followed
//   again (crashed only when their container is gone), pending jobs run   (docs/jobs.md)
//
// With a shared database (`shared`), pending jobs are not this process's: they wait in the store's queue and
// the node that claims one runs it (job-dispatcher.ts); a stop hands back what this node claimed and never
// started, and a lost node's running jobs are crashed (`node_lost`) by the node that takes its work over.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, errors } from '../../errors.js';
import type { RunRequest } from '../run-request.js';
import type { AcceptedRun } from '../runs/run-service.js';
import type { ClaimedJob, Job, JobChange, JobStatus, JobStore, JobWakeups, SharedJobQueue } from '../../store/jobs/job-store.js';
import type { Caller } from '../auth/caller.js';
import type { ContainerState } from '../../runtime/ports/containers.js';
import type { WebhookSender } from '../webhooks/deliverer.js';
import { jobFinishedPayload, jobListItem, jobView, type JobListItem, type JobView } from './job-view.js';
import { RunQueue } from './run-queue.js';
import { JOB_MESSAGES, nodeLostCrash, outcomeChange, serviceCrash, type JobRunner } from './job-outcome.js';
import { JobDispatcher } from './job-dispatcher.js';
import { letsGoOfSessionWhileQueued, runsOnAnyNode } from './job-placement.js';
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
  /**
   * Several nodes on one database: jobs are dispatched through the store's queue (`queue`: the raw store,
   * whose claims are not status changes), woken by `wakeups`; `dispatched` observes each claim's wait.
   */
  readonly shared?: {
    readonly queue: SharedJobQueue;
    readonly wakeups: JobWakeups;
    readonly pollMs?: number;
    readonly dispatched?: (seconds: number, path: 'queued' | 'local') => void;
    /** Sessions and their workspaces are restored on any node (SERVICE_SHARED_DIR): their jobs are not pinned. */
    readonly sessionsMove?: boolean;
  };
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
  /** With a shared database: this node's share of the cluster's queue (the local `queue` then stays empty). */
  private readonly dispatcher: JobDispatcher | undefined;

  constructor(private readonly deps: JobServiceDependencies) {
    this.now = deps.now ?? Date.now;
    this.queue = new RunQueue(deps.maxConcurrentRuns, (id, error) => deps.log.error({ err: error, jobId: id }, 'job task failed unexpectedly'));
    deps.shutdownSignal?.addEventListener('abort', () => this.unstarted.push(...this.queue.close()), { once: true });
    const { shared } = deps;
    this.dispatcher = shared
      ? new JobDispatcher({
          queue: shared.queue,
          wakeups: shared.wakeups,
          slots: deps.maxConcurrentRuns,
          run: (claimed) => this.runClaimed(claimed),
          reconcile: () => this.reconcile(),
          ...(shared.dispatched ? { dispatched: shared.dispatched } : {}),
          ...(shared.pollMs !== undefined ? { pollMs: shared.pollMs } : {}),
          log: deps.log,
        })
      : undefined;
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
    // Shared queue: what this node had claimed and not started goes back to it (nothing of it ran); its
    // pending jobs are anyone's to claim. One node: jobs that had not started are accepted again, under their
    // run and session ids, and queued in their submission order; one that can no longer be accepted (its
    // session or image gone) crashes with the reason.
    let queued = 0;
    if (this.deps.shared) {
      const handedBack = await this.deps.shared.queue.unclaimAll();
      if (handedBack > 0) log.info({ count: handedBack }, 'jobs this node had claimed and not started are back in the shared queue');
    }
    for (const job of this.deps.shared ? [] : await store.withStatus('pending')) {
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
    this.dispatcher?.start();
  }

  /** POST /run/async: validation and the session happen here, so refusals are ordinary HTTP errors. */
  async submit(request: RunRequest, caller: Caller): Promise<SubmittedJob> {
    if (this.isStopping()) throw errors.shuttingDown();
    // A job waits for its container slot while pending (runJob), instead of being refused like a sync run.
    const accepted = await this.deps.runs.accept(request, { caller, slot: 'later' });
    const id = `job-${randomUUID()}`;
    let inserted = false;
    // Shared queue: with a free slot here the job is this node's at once; otherwise it waits to be claimed.
    const claimedHere = this.dispatcher?.reserve() ?? false;
    const pinned = this.dispatcher ? !runsOnAnyNode(accepted.plan, this.deps.shared?.sessionsMove === true) : undefined;
    // A job of an earlier session that waits for any node: the session is let go of before the job is in the
    // queue (job-placement.ts); whichever node claims it, this one too, accepts it again.
    const held = !(pinned === false && !claimedHere && letsGoOfSessionWhileQueued(accepted.plan));
    if (!held) await this.deps.runs.abandon(accepted);
    try {
      if (this.isStopping()) throw errors.shuttingDown();
      const job = await this.deps.store.insert({
        id,
        sessionId: accepted.session.sessionId,
        runId: accepted.runId,
        webhookUrl: accepted.plan.webhookUrl ?? null,
        request,
        owner: caller.owner,
        createdAt: this.timestamp(),
        ...(pinned !== undefined ? { claimed: claimedHere, pinned } : {}),
      });
      inserted = true;
      if (held) this.accepted.set(id, accepted);
      if (!this.dispatcher) this.queue.enqueue(id, () => track(this.jobTasks, this.runJob(id)));
      else if (claimedHere) this.dispatcher.launch({ job, waitedMs: 0, acceptedBy: this.deps.shared!.queue.node });
    } catch (error) {
      if (claimedHere && !inserted) this.dispatcher!.unreserve();
      this.accepted.delete(id);
      if (held) await this.deps.runs.abandon(accepted);
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
    // Held here for the shared queue, or waiting in this process's: let go (a claimer elsewhere finds it cancelled).
    if (this.queue.remove(id) || (this.dispatcher && !this.running.has(id))) await this.releaseQueued(id);
    // Running on another node: that node aborts it when it sees the change (reconcile); nothing to wait for here.
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
    if (this.dispatcher) return this.closeShared();
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

  /**
   * Shutdown with `drain`: resolves once no job is queued or running (new ones are refused by then). Shared
   * queue: once none runs here (the jobs waiting in the queue are other nodes' to run).
   */
  async idle(pollMs = 100): Promise<void> {
    const busy = () => (this.dispatcher ? this.running.size > 0 : this.accepted.size > 0 || this.running.size > 0);
    while (busy()) await new Promise((resolve) => setTimeout(resolve, pollMs));
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
    if (this.dispatcher) {
      await this.dispatcher.stop();
      await this.letGoOfQueued();
    }
    const left = this.queue.close();
    if (left.length > 0) this.deps.log.info({ count: left.length }, 'jobs left pending for the next start');
    if (this.running.size > 0) this.deps.log.info({ count: this.running.size }, 'jobs left running for the next start to follow');
    this.deliveries.abort();
    await Promise.allSettled([...this.deliveryTasks]);
  }

  /**
   * A lost node's jobs, taken over by this node (core/cluster/node-loss.ts, once per lost node): its running
   * jobs crash with `node_lost` (each by one compare-and-set: of two nodes taking over at once, one moves
   * each job) and their webhooks are sent from here; its pending jobs only it could run crash likewise; the
   * webhooks it owed are sent from here. What it claimed and never started is back in the queue.
   */
  async takeOverLostNode(node: string): Promise<{ readonly crashed: number; readonly webhooks: number }> {
    const queue = this.deps.shared?.queue;
    if (!queue) return { crashed: 0, webhooks: 0 };
    const { running, stranded, owedWebhooks } = await queue.lostNodeJobs(node);
    const at = this.timestamp();
    let crashed = 0;
    let webhooks = 0;
    const crash = async (job: Job, from: 'running' | 'pending', error: string) => {
      const changed = await this.deps.store.transition(job.id, [from], { status: 'crashed', crashInfo: nodeLostCrash(), error }, at);
      if (!changed) return;
      crashed += 1;
      if (changed.webhookState === 'pending') webhooks += 1;
      this.afterFinish(changed);
    };
    for (const job of running) await crash(job, 'running', JOB_MESSAGES.nodeLostWhileRunning(node));
    for (const job of stranded) await crash(job, 'pending', JOB_MESSAGES.nodeLostWhilePending(node));
    for (const job of owedWebhooks) {
      const taken = await queue.takeOverWebhook(job.id, node);
      if (taken) {
        webhooks += 1;
        this.deliver(taken);
      }
    }
    return { crashed, webhooks };
  }

  /**
   * This node lost its lease (its heartbeat found another node handling its loss): it claims nothing more,
   * aborts the jobs it runs (another node has crashed them, or will: their containers are removed here), and
   * lets go of what it held for the queue.
   */
  async leaseLost(): Promise<void> {
    if (!this.dispatcher) return;
    await this.dispatcher.stop();
    await this.letGoOfQueued();
    for (const run of this.running.values()) run.controller.abort();
  }

  /** A job this node claimed from the shared queue (or at submission): accepted here again if need be, then run. */
  private async runClaimed({ job, acceptedBy }: ClaimedJob): Promise<void> {
    const queue = this.deps.shared!.queue;
    // Held here under another run id: the job was handed back with a new one meanwhile (its claimer was lost),
    // and runs under the recorded one (postgres-job-store.ts NEW_RUN_ID).
    const held = this.accepted.get(job.id);
    if (held && held.runId !== job.runId) await this.releaseQueued(job.id);
    if (!this.accepted.has(job.id)) {
      if (this.isStopping()) {
        await queue.unclaim(job.id);
        return;
      }
      try {
        this.accepted.set(job.id, await this.deps.runs.acceptAgain({ runId: job.runId, sessionId: job.sessionId, request: job.request as RunRequest, caller: { owner: job.owner } }));
      } catch (error) {
        if (acceptedBy !== queue.node) {
          // What it needs is on its accepting node (a session, a secret, an image): it goes back, for that node only.
          this.deps.log.info({ err: error, jobId: job.id, acceptedBy }, 'a claimed job cannot be accepted on this node; handed back to its accepting node');
          await queue.unclaim(job.id, { pin: true });
          return;
        }
        this.deps.log.warn({ err: error, jobId: job.id }, 'a job of this node cannot be accepted again');
        const reason = error instanceof BerthError ? `: ${error.message}` : '';
        const crashed = await this.deps.store.transition(job.id, ['pending'], { status: 'crashed', crashInfo: serviceCrash('service_restart'), error: `${JOB_MESSAGES.restartedWhilePending}${reason}` }, this.timestamp());
        if (crashed) this.afterFinish(crashed);
        return;
      }
    }
    await track(this.jobTasks, this.runJob(job.id));
  }

  /**
   * The jobs this node holds, checked against the shared queue: a queued job claimed elsewhere, cancelled or
   * gone is let go of; a job this node runs that is no longer running (or claimed) here is aborted (a DELETE
   * on another node, or its loss declared while it was paused), which removes its container.
   */
  private async reconcile(): Promise<void> {
    const queue = this.deps.shared!.queue;
    // What is held and what runs, as it is when the placements are asked for: a placement read before a claim
    // of this node would otherwise be taken for a job lost (a job runs here only after this node claimed it).
    const running = new Map(this.running);
    const held = [...this.accepted.keys()].filter((id) => !running.has(id));
    if (running.size === 0 && held.length === 0) return;
    const placements = await queue.placements([...running.keys(), ...held]);
    const mine = (id: string) => {
      const placement = placements.get(id);
      return placement?.claimedBy === queue.node && (placement.status === 'pending' || placement.status === 'running');
    };
    for (const [id, run] of running) {
      if (!mine(id) && this.running.get(id) === run) run.controller.abort();
    }
    for (const id of held) {
      const placement = placements.get(id);
      const queued = placement?.status === 'pending' && placement.claimedBy === null;
      if (!mine(id) && !queued && !this.running.has(id)) await this.releaseQueued(id);
    }
  }

  /** Lets go of the jobs held here for the shared queue: they stay pending, anyone's to claim. */
  private async letGoOfQueued(): Promise<void> {
    for (const id of [...this.accepted.keys()]) if (!this.running.has(id)) await this.releaseQueued(id);
  }

  /**
   * Shutdown on the shared queue: nothing more is claimed; queued jobs stay pending for the other nodes
   * (those claimed here and not started go back to the queue); running jobs end as on one node.
   */
  private async closeShared(): Promise<void> {
    const { queue } = this.deps.shared!;
    await this.dispatcher!.stop();
    await this.letGoOfQueued();
    for (const run of this.running.values()) run.controller.abort();
    await Promise.allSettled([...this.jobTasks]);
    await this.dispatcher!.settled();
    await Promise.allSettled([...this.jobTasks]);
    const handedBack = await queue.unclaimAll();
    if (handedBack > 0) this.deps.log.info({ count: handedBack }, 'jobs claimed here and not started are back in the shared queue');
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
    if (!accepted) {
      // Shared queue: let go of meanwhile (a cancel, a claim seen late); a job still claimed here goes back.
      if (this.dispatcher) await this.deps.shared!.queue.unclaim(id);
      return;
    }
    const controller = new AbortController();
    let finish!: () => void;
    // Registered before the job is marked running, so a DELETE in between finds something to abort.
    this.running.set(id, { controller, done: new Promise<void>((resolve) => (finish = resolve)) });
    // Shared queue: a job claimed while this node stops is handed back below, not started.
    if (this.dispatcher && this.isStopping()) controller.abort();
    try {
      // Still pending until a container slot is free (SERVICE_MAX_CONTAINERS, _PER_CALLER); a cancel or
      // the shutdown ends the wait and is handled just below.
      await accepted.slot.wait(controller.signal).catch(() => undefined);
      if (this.dispatcher && (controller.signal.aborted || this.isStopping())) {
        // Never started: a stop hands it back to the shared queue (another node runs it); a cancel or a
        // claim lost meanwhile leaves it to the record.
        await this.deps.runs.abandon(accepted);
        if (this.isStopping()) await this.deps.shared!.queue.unclaim(id);
        return;
      }
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
