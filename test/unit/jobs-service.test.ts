// The job state machine with a fake run service: each run ends when the test says so, or when its
// abort signal fires (as the real executor does: the container is killed, the outcome is `cancelled`).
import { trace } from '@opentelemetry/api';
import { ContainerSlots, RunSlot } from '../../src/core/containers/container-slots.js';
import { SOLE_CALLER } from '../../src/core/auth/caller.js';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import pino from 'pino';
import { BerthError, errors } from '../../src/errors.js';
import type { RunRequest } from '../../src/core/run-request.js';
import type { RunPlan } from '../../src/core/run-plan.js';
import type { AcceptedRun } from '../../src/core/runs/run-service.js';
import { RunPhases } from '../../src/core/run-phases.js';
import type { RunOutcome } from '../../src/core/runs/run-executor.js';
import type { ResultEnvelope } from '../../src/engine/stream-json.js';
import { JOB_MESSAGES, JobService, type JobRunner, type JobServiceDependencies } from '../../src/core/jobs/job-service.js';
import type { JobStatus, JobStore } from '../../src/store/jobs/job-store.js';
import { SqliteJobStore } from '../../src/store/jobs/sqlite-job-store.js';
import type { DeliveryResult, WebhookDelivery, WebhookSender } from '../../src/core/webhooks/deliverer.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-jobs-service-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;

function envelope(result: string, extra: Partial<ResultEnvelope> = {}): ResultEnvelope {
  return {
    subtype: 'success', isError: false, result, sessionId: undefined, totalCostUsd: undefined, usage: undefined,
    structuredOutput: undefined, apiErrorStatus: undefined, model: undefined, ...extra,
  };
}

interface FakeRun {
  readonly prompt: string;
  readonly signal: AbortSignal;
  finish(outcome: RunOutcome): void;
}

class FakeRuns implements JobRunner {
  readonly slots = new ContainerSlots({ total: 1000, perCaller: 1000 });
  readonly started: FakeRun[] = [];
  readonly released: string[] = [];
  private counter = 0;
  executeError: Error | undefined;

  async accept(request: RunRequest, _options?: unknown): Promise<AcceptedRun> {
    if (request.prompt === 'refuse me') throw errors.invalid('prompt: refused by the fake');
    this.counter += 1;
    const sessionId = `00000000-0000-4000-8000-${String(this.counter).padStart(12, '0')}`;
    const plan = { prompt: request.prompt, webhookUrl: request.webhook_url, engine: {}, container: { memoryText: '64m', timeoutText: '5s' } } as unknown as RunPlan;
    const session = {
      sessionId,
      engineSession: { kind: 'new', sessionId },
      mountPath: '/nowhere',
      persistent: true,
      release: async () => {
        this.released.push(sessionId);
      },
    } as AcceptedRun['session'];
    return { runId: `run-${this.counter}`, plan, session, phases: new RunPhases(), slot: new RunSlot(this.slots, ''), span: trace.getTracer('test').startSpan('run'), engineBinary: '/opt/claude/claude' };
  }

  /** A pending job of a previous process, accepted again with its own run and session ids. */
  async acceptAgain(run: { readonly runId: string; readonly sessionId: string; readonly request: RunRequest }): Promise<AcceptedRun> {
    const accepted = await this.accept(run.request);
    return { ...accepted, runId: run.runId, session: { ...accepted.session, sessionId: run.sessionId } };
  }

  /** No container of a previous process is ever found here: running jobs found at start crash. */
  async reattach(): Promise<undefined> {
    return undefined;
  }

  async abandon(accepted: AcceptedRun): Promise<void> {
    accepted.slot.release();
    await accepted.session.release();
  }

  async execute(accepted: AcceptedRun, _mode: string, signal: AbortSignal): Promise<RunOutcome> {
    try {
      if (this.executeError) throw this.executeError;
      return await new Promise<RunOutcome>((resolve) => {
        const onAbort = () => resolve({ kind: 'crashed', reason: 'cancelled', exitCode: 137, signal: 'SIGKILL', partialOutput: 'partial', taskCompleted: false });
        signal.addEventListener('abort', onAbort, { once: true });
        this.started.push({ prompt: accepted.plan.prompt, signal, finish: resolve });
      });
    } finally {
      accepted.slot.release();
      await accepted.session.release();
    }
  }

  async toResult(accepted: AcceptedRun, outcome: RunOutcome) {
    if (outcome.kind !== 'completed') throw errors.runFailed('not completed');
    return {
      id: accepted.runId,
      status: 'completed' as const,
      output: outcome.envelope.result,
      session_id: accepted.session.sessionId,
      ...(outcome.envelope.structuredOutput !== undefined ? { structured_output: outcome.envelope.structuredOutput } : {}),
    };
  }

  crashError(accepted: AcceptedRun, outcome: Extract<RunOutcome, { kind: 'crashed' }>): BerthError {
    return outcome.reason === 'oom' ? errors.runOom(accepted.plan.container.memoryText) : errors.runTimeout(accepted.plan.container.timeoutText);
  }

  /** Prompts whose runs the model gateway refused for a budget (the message: the limit named). */
  readonly budgetRefused = new Map<string, string>();

  budgetError(accepted: AcceptedRun, outcome: RunOutcome): BerthError | undefined {
    const message = this.budgetRefused.get(accepted.plan.prompt);
    return message !== undefined && outcome.kind !== 'completed' ? errors.budgetExceeded(message) : undefined;
  }

  /** The run of `prompt`, once it has started. */
  async run(prompt: string): Promise<FakeRun> {
    for (let i = 0; i < 200; i += 1) {
      const run = this.started.find((r) => r.prompt === prompt);
      if (run) return run;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`run of "${prompt}" never started`);
  }
}

class FakeWebhooks implements WebhookSender {
  readonly deliveries: WebhookDelivery[] = [];
  result: DeliveryResult = { outcome: 'delivered', attempts: 1, status: 200 };
  async deliver(delivery: WebhookDelivery): Promise<DeliveryResult> {
    this.deliveries.push(delivery);
    return this.result;
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i += 1) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('JobService', () => {
  let store: JobStore;
  let runs: FakeRuns;
  let webhooks: FakeWebhooks;
  let jobs: JobService;
  let counts: Record<JobStatus, number> | undefined;
  let path: string;

  const create = (extra: Partial<JobServiceDependencies> = {}) =>
    new JobService({
      store, runs, webhooks, maxConcurrentRuns: 1, retentionMs: 3_600_000, log: pino({ level: 'silent' }),
      observer: { jobCounts: (c) => (counts = c) }, cancelWaitMs: 2_000, ...extra,
    });
  const status = async (id: string) => (await store.get(id))?.status;

  beforeEach(async () => {
    path = join(dir, `jobs-${(fileCounter += 1)}.db`);
    store = new SqliteJobStore(path);
    runs = new FakeRuns();
    webhooks = new FakeWebhooks();
    counts = undefined;
    jobs = create();
    await jobs.start();
  });
  afterEach(async () => {
    await jobs.close();
    await store.close();
  });

  it('answers with a job id and the session id, and stores the job pending', async () => {
    await jobs.submit({ prompt: 'blocker' }, SOLE_CALLER);
    const submitted = await jobs.submit({ prompt: 'second' }, SOLE_CALLER);
    assert.match(submitted.job_id, /^job-[0-9a-f-]{36}$/);
    const job = await store.get(submitted.job_id);
    assert.equal(job?.status, 'pending');
    assert.equal(job?.sessionId, submitted.session_id);
    assert.deepEqual(job?.request, { prompt: 'second' });
  });

  it('stores nothing when the request is refused, and passes the error on', async () => {
    await assert.rejects(jobs.submit({ prompt: 'refuse me' }, SOLE_CALLER), (error: unknown) => error instanceof BerthError && error.status === 400);
    assert.deepEqual(await store.list({ owner: '', limit: 10, offset: 0 }), []);
  });

  it('goes pending → running → completed with the run\'s output and structured_output', async () => {
    const { job_id } = await jobs.submit({ prompt: 'answer' }, SOLE_CALLER);
    const run = await runs.run('answer');
    assert.equal(await status(job_id), 'running');
    run.finish({ kind: 'completed', envelope: envelope('forty-two', { structuredOutput: { n: 42 } }), rawOutput: '' });
    await until(async () => (await status(job_id)) === 'completed', 'completed');
    const view = await jobs.get(job_id, SOLE_CALLER);
    assert.equal(view.output, 'forty-two');
    assert.deepEqual(view.structured_output, { n: 42 });
    assert.equal(view.crash_info, null);
    assert.equal(view.error, null);
    assert.ok(view.finished_at);
  });

  it('starts queued jobs one at a time, in submission order', async () => {
    const ids = [];
    for (const prompt of ['a', 'b', 'c']) ids.push((await jobs.submit({ prompt }, SOLE_CALLER)).job_id);
    await runs.run('a');
    await settle();
    assert.deepEqual(runs.started.map((r) => r.prompt), ['a']);
    assert.deepEqual(await Promise.all(ids.map(status)), ['running', 'pending', 'pending']);
    runs.started[0]!.finish({ kind: 'completed', envelope: envelope('A'), rawOutput: '' });
    await runs.run('b');
    runs.started[1]!.finish({ kind: 'completed', envelope: envelope('B'), rawOutput: '' });
    await runs.run('c');
    assert.deepEqual(runs.started.map((r) => r.prompt), ['a', 'b', 'c']);
  });

  it('records an engine error as failed, with its text in error and output', async () => {
    const { job_id } = await jobs.submit({ prompt: 'fails' }, SOLE_CALLER);
    (await runs.run('fails')).finish({ kind: 'failed', message: 'API Error: 529 overloaded', envelope: envelope('API Error: 529 overloaded', { isError: true }), rawOutput: '' });
    await until(async () => (await status(job_id)) === 'failed', 'failed');
    const view = await jobs.get(job_id, SOLE_CALLER);
    assert.equal(view.error, 'API Error: 529 overloaded');
    assert.equal(view.output, 'API Error: 529 overloaded');
    assert.equal(view.crash_info, null);
  });

  it('records a run the model gateway refused for its budget as failed, with the error naming the limit', async () => {
    runs.budgetRefused.set('spends', "this run's max_budget_usd (0.01 USD) is spent: 0.0123 USD used");
    const { job_id } = await jobs.submit({ prompt: 'spends' }, SOLE_CALLER);
    (await runs.run('spends')).finish({ kind: 'failed', message: 'API Error: 403 …', envelope: envelope('API Error: 403 …', { isError: true }), rawOutput: '' });
    await until(async () => (await status(job_id)) === 'failed', 'failed');
    const view = await jobs.get(job_id, SOLE_CALLER);
    assert.equal(view.error, "model budget reached: this run's max_budget_usd (0.01 USD) is spent: 0.0123 USD used");
    assert.equal(view.output, 'API Error: 403 …');
  });

  it('records an OOM kill as crashed with crash_info and the reason', async () => {
    const { job_id } = await jobs.submit({ prompt: 'hog' }, SOLE_CALLER);
    (await runs.run('hog')).finish({ kind: 'crashed', reason: 'oom', exitCode: 137, signal: 'SIGKILL', partialOutput: '{"type":"system"}\n', taskCompleted: false });
    await until(async () => (await status(job_id)) === 'crashed', 'crashed');
    const view = await jobs.get(job_id, SOLE_CALLER);
    assert.deepEqual(view.crash_info, { exit_code: 137, signal: 'SIGKILL', partial_output: '{"type":"system"}\n', task_completed: false, reason: 'oom' });
    assert.match(view.error ?? '', /out of memory \(container\.memory 64m\)/);
  });

  it('records a run that could not be started as failed', async () => {
    runs.executeError = new Error('podman: image vanished');
    const { job_id } = await jobs.submit({ prompt: 'broken' }, SOLE_CALLER);
    await until(async () => (await status(job_id)) === 'failed', 'failed');
    assert.equal((await jobs.get(job_id, SOLE_CALLER)).error, 'run failed: podman: image vanished');
  });

  it('cancels a pending job without ever running it, and releases its session', async () => {
    await jobs.submit({ prompt: 'blocker' }, SOLE_CALLER);
    const queued = await jobs.submit({ prompt: 'queued' }, SOLE_CALLER);
    assert.deepEqual(await jobs.cancel(queued.job_id, SOLE_CALLER), { id: queued.job_id, status: 'cancelled' });
    assert.equal(await status(queued.job_id), 'cancelled');
    assert.ok(runs.released.includes(queued.session_id));
    (await runs.run('blocker')).finish({ kind: 'completed', envelope: envelope('x'), rawOutput: '' });
    await settle();
    assert.deepEqual(runs.started.map((r) => r.prompt), ['blocker']);
  });

  it('cancels a running job by aborting its run, and answers after the run has ended', async () => {
    const { job_id } = await jobs.submit({ prompt: 'long' }, SOLE_CALLER);
    const run = await runs.run('long');
    const answer = await jobs.cancel(job_id, SOLE_CALLER);
    assert.deepEqual(answer, { id: job_id, status: 'cancelled' });
    assert.equal(run.signal.aborted, true);
    assert.equal(runs.released.length, 1, 'the run had ended (its session released) before DELETE answered');
    await settle();
    const view = await jobs.get(job_id, SOLE_CALLER);
    assert.equal(view.status, 'cancelled');
    assert.equal(view.crash_info, null);
    assert.equal(view.error, JOB_MESSAGES.cancelled);
  });

  it('refuses to cancel a finished job with 409 and an unknown one with 404', async () => {
    const { job_id } = await jobs.submit({ prompt: 'quick' }, SOLE_CALLER);
    (await runs.run('quick')).finish({ kind: 'completed', envelope: envelope('x'), rawOutput: '' });
    await until(async () => (await status(job_id)) === 'completed', 'completed');
    await assert.rejects(jobs.cancel(job_id, SOLE_CALLER), (error: unknown) => error instanceof BerthError && error.code === 'BERTH_ERR_JOB_FINISHED' && error.status === 409);
    await assert.rejects(jobs.cancel('job-nope', SOLE_CALLER), (error: unknown) => error instanceof BerthError && error.status === 404);
    await assert.rejects(jobs.get('job-nope', SOLE_CALLER), (error: unknown) => error instanceof BerthError && error.code === 'BERTH_ERR_JOB_NOT_FOUND');
  });

  it('sends the job.finished webhook once a job with webhook_url finishes, stamped with finished_at', async () => {
    const { job_id, session_id } = await jobs.submit({ prompt: 'hooked', webhook_url: 'https://receiver.example/hook' }, SOLE_CALLER);
    (await runs.run('hooked')).finish({ kind: 'completed', envelope: envelope('done'), rawOutput: '' });
    await until(async () => (await store.get(job_id))?.webhookState === 'delivered', 'delivery recorded');
    assert.equal(webhooks.deliveries.length, 1);
    const [delivery] = webhooks.deliveries;
    const job = await store.get(job_id);
    assert.equal(delivery!.url, 'https://receiver.example/hook');
    assert.equal(delivery!.timestamp, Math.floor(Date.parse(job!.finishedAt!) / 1000));
    assert.deepEqual(JSON.parse(delivery!.body), {
      event: 'job.finished', job_id, status: 'completed', session_id, output: 'done', crash_info: null,
      created_at: job!.createdAt, finished_at: job!.finishedAt,
    });
  });

  it('sends the webhook of a cancelled job too', async () => {
    const { job_id } = await jobs.submit({ prompt: 'cancel me', webhook_url: 'https://receiver.example/hook' }, SOLE_CALLER);
    await runs.run('cancel me');
    await jobs.cancel(job_id, SOLE_CALLER);
    await until(async () => webhooks.deliveries.length === 1, 'delivery');
    const body = JSON.parse(webhooks.deliveries[0]!.body);
    assert.equal(body.status, 'cancelled');
    assert.equal(body.error, JOB_MESSAGES.cancelled);
  });

  it('records a webhook that could not be delivered as failed', async () => {
    webhooks.result = { outcome: 'failed', attempts: 6, reason: 'answered HTTP 503' };
    const { job_id } = await jobs.submit({ prompt: 'hooked', webhook_url: 'https://receiver.example/hook' }, SOLE_CALLER);
    (await runs.run('hooked')).finish({ kind: 'completed', envelope: envelope('done'), rawOutput: '' });
    await until(async () => (await store.get(job_id))?.webhookState === 'failed', 'failure recorded');
  });

  it('reports job counts by status to the observer', async () => {
    const { job_id } = await jobs.submit({ prompt: 'counted' }, SOLE_CALLER);
    await runs.run('counted');
    await until(async () => counts?.running === 1, 'running counted');
    runs.started[0]!.finish({ kind: 'completed', envelope: envelope('x'), rawOutput: '' });
    await until(async () => counts?.completed === 1 && counts.running === 0, 'completed counted');
    assert.equal(await status(job_id), 'completed');
  });

  it('at close, marks queued jobs crashed and records running ones as stopped by the service', async () => {
    const running = await jobs.submit({ prompt: 'running' }, SOLE_CALLER);
    const queued = await jobs.submit({ prompt: 'queued' }, SOLE_CALLER);
    await runs.run('running');
    await jobs.close();
    const runningJob = await jobs.get(running.job_id, SOLE_CALLER);
    assert.equal(runningJob.status, 'crashed');
    assert.equal(runningJob.crash_info?.reason, 'service_stop');
    assert.equal(runningJob.crash_info?.partial_output, 'partial');
    assert.equal(runningJob.error, JOB_MESSAGES.stoppedWhileRunning);
    const queuedJob = await jobs.get(queued.job_id, SOLE_CALLER);
    assert.equal(queuedJob.status, 'crashed');
    assert.equal(queuedJob.error, JOB_MESSAGES.stoppedWhilePending);
    assert.ok(runs.released.includes(queued.session_id));
  });

  it('starts no queued job once the shutdown signal fires', async () => {
    await jobs.close();
    const shutdown = new AbortController();
    jobs = create({ shutdownSignal: shutdown.signal });
    await jobs.start();
    await jobs.submit({ prompt: 'first' }, SOLE_CALLER);
    const second = await jobs.submit({ prompt: 'second' }, SOLE_CALLER);
    const first = await runs.run('first');
    shutdown.abort();
    first.finish({ kind: 'completed', envelope: envelope('x'), rawOutput: '' });
    await settle();
    assert.deepEqual(runs.started.map((r) => r.prompt), ['first']);
    await assert.rejects(jobs.submit({ prompt: 'late' }, SOLE_CALLER), (error: unknown) => error instanceof BerthError && error.status === 503);
    await jobs.close();
    assert.equal(await status(second.job_id), 'crashed');
  });

  it('at start, marks a job left running without a container crashed and sends its webhook', async () => {
    await jobs.close();
    const at = '2030-01-01T00:00:00.000Z';
    await store.insert({ id: 'job-was-running', sessionId: 's1', runId: 'run-1', webhookUrl: 'http://127.0.0.1:9/hook', request: { prompt: 'x' }, owner: '', createdAt: at });
    await store.transition('job-was-running', ['pending'], { status: 'running' }, at);
    jobs = create({ retentionMs: 100 * 365 * 86_400_000 });
    await jobs.start();
    const wasRunning = await jobs.get('job-was-running', SOLE_CALLER);
    assert.equal(wasRunning.status, 'crashed');
    assert.deepEqual(wasRunning.crash_info, { exit_code: -1, signal: '', partial_output: '', task_completed: false, reason: 'service_restart' });
    assert.equal(wasRunning.error, JOB_MESSAGES.restartedWhileRunning);
    await until(async () => webhooks.deliveries.length === 1, 'the owed webhook');
    assert.equal(JSON.parse(webhooks.deliveries[0]!.body).job_id, 'job-was-running');
  });

  it('at start, runs the jobs left pending, in submission order, under their own session ids', async () => {
    await jobs.close();
    const at = '2030-01-01T00:00:00.000Z';
    const session = '00000000-0000-4000-8000-0000000000aa';
    await store.insert({ id: 'job-was-pending', sessionId: session, runId: 'run-2', webhookUrl: 'http://127.0.0.1:9/hook', request: { prompt: 'y' }, owner: '', createdAt: at });
    await store.insert({ id: 'job-refused-now', sessionId: 's3', runId: 'run-3', webhookUrl: null, request: { prompt: 'refuse me' }, owner: '', createdAt: at });
    jobs = create({ retentionMs: 100 * 365 * 86_400_000 });
    await jobs.start();
    const refused = await jobs.get('job-refused-now', SOLE_CALLER);
    assert.equal(refused.status, 'crashed', 'a job that can no longer be accepted is not left pending');
    assert.equal(refused.crash_info?.reason, 'service_restart');
    assert.match(refused.error ?? '', /could not be accepted again: prompt: refused by the fake/);

    (await runs.run('y')).finish({ kind: 'completed', envelope: envelope('ran after the restart'), rawOutput: '' });
    await until(async () => (await status('job-was-pending')) === 'completed', 'the pending job to complete');
    const ran = await jobs.get('job-was-pending', SOLE_CALLER);
    assert.equal(ran.output, 'ran after the restart');
    assert.equal(ran.session_id, session);
    await until(async () => webhooks.deliveries.length === 1, 'its webhook');
  });

  it('at start, sends again a webhook whose delivery a stop interrupted', async () => {
    await jobs.close();
    const at = '2030-01-01T00:00:00.000Z';
    await store.insert({ id: 'job-owed', sessionId: 's1', runId: 'run-1', webhookUrl: 'http://127.0.0.1:9/hook', request: { prompt: 'x' }, owner: '', createdAt: at });
    await store.transition('job-owed', ['pending'], { status: 'completed', output: 'ok' }, at);
    jobs = create({ retentionMs: 100 * 365 * 86_400_000 });
    await jobs.start();
    await until(async () => (await store.get('job-owed'))?.webhookState === 'delivered', 'redelivery');
    assert.equal(webhooks.deliveries[0]!.timestamp, Math.floor(Date.parse(at) / 1000));
  });

  it('prunes finished jobs older than the retention, keeping recent and unfinished ones', async () => {
    await jobs.close();
    const old = new Date(Date.now() - 2 * 3_600_000).toISOString();
    for (const id of ['job-old-done', 'job-old-pending', 'job-new-done']) {
      await store.insert({ id, sessionId: 's', runId: 'r', webhookUrl: null, request: { prompt: 'x' }, owner: '', createdAt: old });
    }
    await store.transition('job-old-done', ['pending'], { status: 'completed' }, old);
    await store.transition('job-new-done', ['pending'], { status: 'completed' }, new Date().toISOString());
    jobs = create({ retentionMs: 3_600_000 });
    await jobs.start();
    assert.equal(await store.get('job-old-done'), undefined);
    assert.equal(await status('job-new-done'), 'completed');
    assert.notEqual(await store.get('job-old-pending'), undefined, 'unfinished: run again, and kept');
  });

  it('lists newest first with a status filter, clamping the limit', async () => {
    const a = await jobs.submit({ prompt: 'a' }, SOLE_CALLER);
    const b = await jobs.submit({ prompt: 'b' }, SOLE_CALLER);
    await jobs.cancel(b.job_id, SOLE_CALLER);
    assert.deepEqual((await jobs.list({}, SOLE_CALLER)).map((j) => j.id), [b.job_id, a.job_id]);
    assert.deepEqual((await jobs.list({ status: 'cancelled' }, SOLE_CALLER)).map((j) => j.id), [b.job_id]);
    assert.deepEqual((await jobs.list({ limit: 1, offset: 1 }, SOLE_CALLER)).map((j) => j.id), [a.job_id]);
    assert.deepEqual(Object.keys((await jobs.list({}, SOLE_CALLER))[0]!).sort(), ['created_at', 'id', 'status']);
  });
});
