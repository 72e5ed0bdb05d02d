// The JobStore contract (src/store/jobs/job-store.ts) as one suite any backend runs: pass a name and a function
// that opens a fresh, empty store. Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { CrashInfo, JobStore, NewJob } from '../../src/store/jobs/job-store.js';

const T0 = '2030-01-01T00:00:00.000Z';
const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';

export function newJob(n: number, extra: Partial<NewJob> = {}): NewJob {
  return {
    id: `job-${n}`,
    sessionId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    runId: `run-${n}`,
    webhookUrl: null,
    request: { prompt: `prompt ${n}` },
    owner: 'client-a',
    createdAt: T0,
    ...extra,
  };
}

const CRASH: CrashInfo = { exit_code: 137, signal: 'SIGKILL', partial_output: '{"type":"system"}\n', task_completed: false, reason: 'oom' };

/** Text an engine may print: quotes, backslashes, new lines, a NUL, characters beyond ASCII and beyond the BMP. */
const AWKWARD_TEXT = 'say "hi" \\ back\nslash\r\n\u0000nul\ttab é 漢字 🚀 \u2028';

export function jobStoreContract(name: string, open: () => JobStore | Promise<JobStore>): void {
  describe(`JobStore contract: ${name}`, () => {
    let store: JobStore;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(() => store.close());

    it('stores a new job as pending with every field readable', async () => {
      const inserted = await store.insert(newJob(1, { webhookUrl: 'https://example.com/hook', request: { prompt: 'p', engine: { model: 'haiku' } } }));
      assert.equal(inserted.status, 'pending');
      const read = await store.get('job-1');
      assert.deepEqual(read, inserted);
      assert.deepEqual(read, {
        id: 'job-1', status: 'pending', output: '', structuredOutput: undefined, sessionId: newJob(1).sessionId, runId: 'run-1',
        crashInfo: null, error: null, webhookUrl: 'https://example.com/hook', webhookState: null,
        request: { prompt: 'p', engine: { model: 'haiku' } }, owner: 'client-a', createdAt: T0, updatedAt: T0, finishedAt: null,
      });
    });

    it('knows no job that was never inserted', async () => {
      assert.equal(await store.get('job-unknown'), undefined);
    });

    it('refuses a second job with the same id', async () => {
      await store.insert(newJob(1));
      await assert.rejects(store.insert(newJob(1)));
      assert.equal((await store.list({ owner: 'client-a', limit: 50, offset: 0 })).length, 1);
    });

    it('moves a job only from the statuses given', async () => {
      await store.insert(newJob(1));
      assert.equal(await store.transition('job-1', ['running'], { status: 'completed' }, T1), undefined);
      assert.equal((await store.get('job-1'))?.status, 'pending');
      const running = await store.transition('job-1', ['pending'], { status: 'running' }, T1);
      assert.equal(running?.status, 'running');
      assert.equal(running?.updatedAt, T1);
      assert.equal(running?.finishedAt, null);
      assert.equal(await store.transition('job-1', [], { status: 'cancelled' }, T2), undefined, 'no status to move from');
    });

    it('lets exactly one of two racing transitions win', async () => {
      await store.insert(newJob(1));
      await store.transition('job-1', ['pending'], { status: 'running' }, T1);
      const [cancel, complete] = await Promise.all([
        store.transition('job-1', ['pending', 'running'], { status: 'cancelled' }, T2),
        store.transition('job-1', ['running'], { status: 'completed', output: 'done' }, T2),
      ]);
      assert.equal([cancel, complete].filter((job) => job !== undefined).length, 1);
      assert.equal((await store.get('job-1'))?.status, (cancel ?? complete)?.status);
    });

    it('lets exactly one of many racing claims of a pending job win', async () => {
      await store.insert(newJob(1));
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store.transition('job-1', ['pending'], { status: 'running', output: `claim ${i}` }, T1)),
      );
      const winners = claims.filter((job) => job !== undefined);
      assert.equal(winners.length, 1);
      assert.equal((await store.get('job-1'))?.output, winners[0]!.output);
    });

    it('answers undefined for a transition of an unknown job', async () => {
      assert.equal(await store.transition('job-unknown', ['pending'], { status: 'running' }, T1), undefined);
    });

    it('records output, structured_output, crash_info and error with a finished status', async () => {
      await store.insert(newJob(1));
      await store.insert(newJob(2));
      const completed = await store.transition('job-1', ['pending'], { status: 'completed', output: 'answer', structuredOutput: { a: [1, 'x', null] } }, T1);
      assert.equal(completed?.output, 'answer');
      assert.deepEqual(completed?.structuredOutput, { a: [1, 'x', null] });
      assert.equal(completed?.finishedAt, T1);
      const crashed = await store.transition('job-2', ['pending'], { status: 'crashed', crashInfo: CRASH, error: 'out of memory' }, T2);
      assert.deepEqual((await store.get('job-2'))?.crashInfo, CRASH);
      assert.equal(crashed?.error, 'out of memory');
      assert.equal(crashed?.finishedAt, T2);
    });

    it('keeps any text exactly: output, error and the request, NUL and all', async () => {
      await store.insert(newJob(1, { request: { prompt: AWKWARD_TEXT, nested: { list: [AWKWARD_TEXT, 1.5, true, null] } } }));
      await store.transition('job-1', ['pending'], { status: 'failed', output: AWKWARD_TEXT, error: AWKWARD_TEXT }, T1);
      const job = await store.get('job-1');
      assert.equal(job?.output, AWKWARD_TEXT);
      assert.equal(job?.error, AWKWARD_TEXT);
      assert.deepEqual(job?.request, { prompt: AWKWARD_TEXT, nested: { list: [AWKWARD_TEXT, 1.5, true, null] } });
    });

    it('tells a structured_output of null from none, and keeps scalars', async () => {
      for (let n = 1; n <= 4; n += 1) await store.insert(newJob(n));
      await store.transition('job-1', ['pending'], { status: 'completed', structuredOutput: null }, T1);
      await store.transition('job-2', ['pending'], { status: 'completed' }, T1);
      await store.transition('job-3', ['pending'], { status: 'completed', structuredOutput: 'just a string' }, T1);
      await store.transition('job-4', ['pending'], { status: 'completed', structuredOutput: 0 }, T1);
      assert.equal((await store.get('job-1'))?.structuredOutput, null);
      assert.equal((await store.get('job-2'))?.structuredOutput, undefined);
      assert.equal((await store.get('job-3'))?.structuredOutput, 'just a string');
      assert.equal((await store.get('job-4'))?.structuredOutput, 0);
    });

    it('keeps fields a transition leaves out', async () => {
      await store.insert(newJob(1));
      await store.transition('job-1', ['pending'], { status: 'running', output: 'partial' }, T1);
      const done = await store.transition('job-1', ['running'], { status: 'failed', error: 'boom' }, T2);
      assert.equal(done?.output, 'partial');
    });

    it('marks the webhook pending when a job with a webhook_url finishes, and only then', async () => {
      await store.insert(newJob(1, { webhookUrl: 'http://127.0.0.1:9/hook' }));
      await store.insert(newJob(2));
      assert.equal((await store.transition('job-1', ['pending'], { status: 'running' }, T1))?.webhookState, null);
      assert.equal((await store.transition('job-1', ['running'], { status: 'completed' }, T2))?.webhookState, 'pending');
      assert.equal((await store.transition('job-2', ['pending'], { status: 'cancelled' }, T2))?.webhookState, null);
      assert.deepEqual((await store.pendingWebhooks()).map((job) => job.id), ['job-1']);
      await store.setWebhookState('job-1', 'delivered');
      assert.deepEqual(await store.pendingWebhooks(), []);
      assert.equal((await store.get('job-1'))?.webhookState, 'delivered');
      await store.setWebhookState('job-2', 'delivered');
      assert.equal((await store.get('job-2'))?.webhookState, null, 'a job without webhook_url has no webhook state');
    });

    it('lists only the owner\'s jobs', async () => {
      await store.insert(newJob(1, { createdAt: T0 }));
      await store.insert(newJob(2, { createdAt: T0, owner: 'client-b' }));
      assert.deepEqual((await store.list({ owner: 'client-b', limit: 50, offset: 0 })).map((job) => job.id), ['job-2']);
      assert.equal((await store.get('job-2'))?.owner, 'client-b');
    });

    it('lists newest first, filtered by status, paged by limit and offset', async () => {
      for (let n = 1; n <= 5; n += 1) await store.insert(newJob(n, { createdAt: T0 }));
      await store.transition('job-2', ['pending'], { status: 'cancelled' }, T1);
      await store.transition('job-4', ['pending'], { status: 'cancelled' }, T1);
      assert.deepEqual((await store.list({ owner: 'client-a', limit: 50, offset: 0 })).map((job) => job.id), ['job-5', 'job-4', 'job-3', 'job-2', 'job-1']);
      assert.deepEqual((await store.list({ owner: 'client-a', limit: 2, offset: 1 })).map((job) => job.id), ['job-4', 'job-3']);
      assert.deepEqual(await store.list({ owner: 'client-a', status: 'cancelled', limit: 50, offset: 0 }), [
        { id: 'job-4', status: 'cancelled', createdAt: T0 },
        { id: 'job-2', status: 'cancelled', createdAt: T0 },
      ]);
      assert.deepEqual(await store.list({ owner: 'client-a', limit: 50, offset: 10 }), []);
    });

    it('orders by insertion, not by created_at (a clock that stepped back)', async () => {
      await store.insert(newJob(1, { createdAt: T2 }));
      await store.insert(newJob(2, { createdAt: T0 }));
      assert.deepEqual((await store.list({ owner: 'client-a', limit: 50, offset: 0 })).map((job) => job.id), ['job-2', 'job-1']);
      assert.deepEqual((await store.withStatus('pending')).map((job) => job.id), ['job-1', 'job-2']);
    });

    it('returns the jobs of one status oldest first', async () => {
      for (let n = 1; n <= 3; n += 1) await store.insert(newJob(n));
      await store.transition('job-2', ['pending'], { status: 'running' }, T1);
      assert.deepEqual((await store.withStatus('pending')).map((job) => job.id), ['job-1', 'job-3']);
      assert.deepEqual((await store.withStatus('running')).map((job) => job.id), ['job-2']);
    });

    it('counts jobs by status, with zero for the empty ones', async () => {
      for (let n = 1; n <= 3; n += 1) await store.insert(newJob(n));
      await store.transition('job-1', ['pending'], { status: 'running' }, T1);
      assert.deepEqual(await store.countByStatus(), { pending: 2, running: 1, completed: 0, failed: 0, crashed: 0, cancelled: 0 });
    });

    it('deletes only finished jobs that finished before the cutoff', async () => {
      for (let n = 1; n <= 4; n += 1) await store.insert(newJob(n));
      await store.transition('job-1', ['pending'], { status: 'completed' }, T0);
      await store.transition('job-2', ['pending'], { status: 'crashed' }, T2);
      await store.transition('job-3', ['pending'], { status: 'running' }, T0);
      assert.equal(await store.deleteFinishedBefore(T1), 1);
      assert.deepEqual((await store.list({ owner: 'client-a', limit: 50, offset: 0 })).map((job) => job.id), ['job-4', 'job-3', 'job-2']);
    });

    it('refuses work once closed', async () => {
      await store.insert(newJob(1));
      await store.close();
      await assert.rejects(store.get('job-1'));
      await assert.rejects(store.insert(newJob(2)));
    });
  });
}
