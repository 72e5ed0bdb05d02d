// Async jobs end to end: real Podman, the real engine, the offline model. Jobs across a kill -9 or a stop of
// the service are in restart.test.ts.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { waitFor } from '../support/wait.js';

const SECRET = 'jobs-integration-webhook-secret';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FINISHED = new Set(['completed', 'failed', 'crashed', 'cancelled']);

/** The receiver recipe of docs/jobs.md, verbatim. */
function verifyWebhook(secret: string, headers: IncomingHttpHeaders, rawBody: Buffer, toleranceSeconds = 600): boolean {
  const timestamp = String(headers['x-service-timestamp'] ?? '');
  const signature = String(headers['x-service-signature'] ?? '');
  if (!/^\d+$/.test(timestamp)) return false;
  const expected = `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex')}`;
  const genuine = signature.length === expected.length && timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
  return genuine && Math.abs(Date.now() / 1000 - Number(timestamp)) <= toleranceSeconds;
}

interface Delivery {
  readonly headers: IncomingHttpHeaders;
  readonly raw: Buffer;
  readonly body: any;
}

/** A webhook receiver: records every delivery; answers 503 to the first delivery of the job ids in `failOnce`. */
async function startReceiver() {
  const deliveries: Delivery[] = [];
  const failOnce = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const body = JSON.parse(raw.toString('utf8'));
      deliveries.push({ headers: req.headers, raw, body });
      if (failOnce.delete(body.job_id)) res.writeHead(503).end('try again');
      else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/berth`,
    deliveries,
    failOnce,
    of: (jobId: string) => deliveries.filter((d) => d.body.job_id === jobId),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}


describe('async jobs', () => {
  let t: TestBerth;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  const job = async (id: string) => (await t.request('GET', `/jobs/${id}`)).body;
  const finished = (id: string, timeoutMs = 60_000) =>
    waitFor(`job ${id} to finish`, async () => {
      const body = await job(id);
      return FINISHED.has(body.status) ? body : undefined;
    }, timeoutMs);
  const submit = async (body: unknown) => {
    const response = await t.request('POST', '/run/async', body);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body as { job_id: string; session_id: string };
  };

  before(async () => {
    receiver = await startReceiver();
    t = await startTestBerth({
      SERVICE_MAX_CONCURRENT_RUNS: '1',
      SERVICE_WEBHOOK_SIGNING_SECRET: SECRET,
      SERVICE_WEBHOOK_RETRY_BASE_DELAY: '300ms',
      // The receiver listens on loopback, which webhooks may target only when allowed.
      SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), [], 'no Berth container may outlive its job');
  });
  after(async () => {
    await t.stop();
    await receiver.close();
  });

  test('a job goes pending → running → completed, and its output equals a sync run of the same prompt', async () => {
    // With one run at a time, the second job has to wait behind the first.
    const blocker = await submit({ prompt: 'sleep: 1500\nsay: blocker' });
    const prompt = 'say: the same answer either way';
    const submitted = await submit({ prompt });
    assert.match(submitted.job_id, /^job-/);
    assert.match(submitted.session_id, UUID);

    const seen: string[] = [];
    const done = await waitFor('the second job to finish', async () => {
      const body = await job(submitted.job_id);
      if (seen.at(-1) !== body.status) seen.push(body.status);
      return FINISHED.has(body.status) ? body : undefined;
    }, 60_000, 50);
    assert.deepEqual(seen, ['pending', 'running', 'completed']);
    assert.equal((await job(blocker.job_id)).status, 'completed');

    const sync = await t.request('POST', '/run', { prompt });
    assert.equal(sync.status, 200, JSON.stringify(sync.body));
    assert.equal(done.output, sync.body.output);
    assert.equal(done.session_id, submitted.session_id);
    assert.equal(done.crash_info, null);
    assert.equal(done.error, null);
    assert.ok(Date.parse(done.updated_at) >= Date.parse(done.created_at));

    const listed = await t.request('GET', '/jobs?limit=2');
    assert.deepEqual(listed.body.jobs.map((j: { id: string }) => j.id), [submitted.job_id, blocker.job_id]);
    assert.deepEqual(Object.keys(listed.body.jobs[0]).sort(), ['created_at', 'id', 'status']);
  });

  test('DELETE on a running job cancels it within 5 s, leaves no container, and fires its webhook', async () => {
    const { job_id } = await submit({ prompt: 'run: /bin/sleep 600', webhook_url: receiver.url });
    await waitFor('the job container to run', async () => (await job(job_id)).status === 'running' && (await t.leftovers()).length === 1);
    await delay(2_500); // the engine reaches its Bash tool: the sleep is running inside the container

    const started = Date.now();
    const response = await t.request('DELETE', `/jobs/${job_id}`);
    const elapsed = Date.now() - started;
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual(response.body, { id: job_id, status: 'cancelled' });
    assert.ok(elapsed < 5_000, `DELETE took ${elapsed} ms`);
    assert.deepEqual(await t.leftovers(), []);
    assert.equal((await job(job_id)).status, 'cancelled');

    const again = await t.request('DELETE', `/jobs/${job_id}`);
    assert.equal(again.status, 409);
    assert.match(again.body.error, /already cancelled/);

    const [delivery] = await waitFor('the cancelled webhook', async () => (receiver.of(job_id).length > 0 ? receiver.of(job_id) : undefined));
    assert.equal(delivery!.body.status, 'cancelled');
  });

  test('a job killed for memory is crashed with exit_code 137 and partial output', async () => {
    // 128m, not 64m: under 64m the engine itself is killed while starting, before it prints anything.
    const { job_id } = await submit({ prompt: 'run: x=a; while :; do x=$x$x; done', container: { memory: '128m' } });
    const done = await finished(job_id);
    assert.equal(done.status, 'crashed', JSON.stringify(done));
    assert.equal(done.crash_info.exit_code, 137);
    assert.equal(done.crash_info.reason, 'oom');
    assert.equal(done.crash_info.task_completed, false);
    assert.match(done.crash_info.partial_output, /"type":"system"/, 'the engine\'s stream-json lines up to the kill');
    assert.match(done.error, /out of memory \(container\.memory 128m\)/);
  });

  test('a job past its container.timeout is crashed', async () => {
    const started = Date.now();
    const { job_id } = await submit({ prompt: 'run: /bin/sleep 600', container: { timeout: '5s' } });
    const done = await finished(job_id);
    assert.equal(done.status, 'crashed', JSON.stringify(done));
    assert.equal(done.crash_info.reason, 'timeout');
    assert.equal(done.crash_info.exit_code, 137);
    assert.equal(done.crash_info.signal, 'SIGKILL');
    assert.match(done.error, /timed out after 5s/);
    assert.ok(Date.now() - started < 30_000);
  });

  test('an engine API error makes the job failed with the error text', async () => {
    const { job_id } = await submit({ prompt: 'fail: server' });
    const done = await finished(job_id);
    assert.equal(done.status, 'failed', JSON.stringify(done));
    assert.match(done.error, /API Error: 500/);
    assert.equal(done.crash_info, null);
  });

  test('the webhook is signed as documented and a retry after a 503 carries the same timestamp and signature', async () => {
    const { job_id, session_id } = await submit({ prompt: 'say: signed and sealed', webhook_url: receiver.url });
    receiver.failOnce.add(job_id);
    const deliveries = await waitFor('two deliveries', async () => (receiver.of(job_id).length >= 2 ? receiver.of(job_id) : undefined), 60_000);
    const [first, retry] = deliveries;
    for (const delivery of [first!, retry!]) {
      assert.equal(verifyWebhook(SECRET, delivery.headers, delivery.raw), true);
      assert.equal(delivery.headers['content-type'], 'application/json');
    }
    assert.equal(retry!.headers['x-service-timestamp'], first!.headers['x-service-timestamp']);
    assert.equal(retry!.headers['x-service-signature'], first!.headers['x-service-signature']);
    assert.deepEqual(retry!.raw, first!.raw);
    assert.equal(verifyWebhook('some-other-secret', first!.headers, first!.raw), false);

    const done = await job(job_id);
    assert.deepEqual(first!.body, {
      event: 'job.finished', job_id, status: 'completed', session_id, output: 'signed and sealed', crash_info: null,
      created_at: done.created_at, finished_at: done.finished_at,
    });
    assert.equal(first!.headers['x-service-timestamp'], String(Math.floor(Date.parse(done.finished_at) / 1000)));
    // The next retry would come 2 × 300 ms after the 2xx (SERVICE_WEBHOOK_RETRY_BASE_DELAY=300ms, doubling);
    // waiting over three times that long leaves it no room to hide.
    await delay(2_000);
    assert.equal(receiver.of(job_id).length, 2, 'a 2xx ends the delivery');
  });

  test('requests that cannot run are refused as JSON errors and no job is created', async () => {
    const before = (await t.request('GET', '/jobs?limit=500')).body.jobs.length;
    const badWorkdir = await t.request('POST', '/run/async', { prompt: 'x', workdir: '../etc' });
    assert.equal(badWorkdir.status, 400);
    assert.equal(badWorkdir.body.status, 'error');
    const badHook = await t.request('POST', '/run/async', { prompt: 'x', webhook_url: 'ftp://example.com/x' });
    assert.equal(badHook.status, 400);
    assert.match(badHook.body.error, /webhook_url/);
    const withCredentials = await t.request('POST', '/run/async', { prompt: 'x', webhook_url: 'https://user:pw@example.com/x' });
    assert.equal(withCredentials.status, 400);
    for (const internal of ['http://169.254.169.254/latest/meta-data', 'http://10.0.0.1/hook', 'http://127.0.0.2/hook', 'http://[::1]/hook']) {
      const refused = await t.request('POST', '/run/async', { prompt: 'x', webhook_url: internal });
      assert.equal(refused.status, 400, `${internal} is internal and not named by SERVICE_WEBHOOK_ALLOWED_HOSTS=127.0.0.1`);
      assert.match(refused.body.error, /^webhook_url: .*SERVICE_WEBHOOK_ALLOWED_HOSTS/);
    }
    const unknownSession = await t.request('POST', '/run/async', {
      prompt: 'x', engine: { session_id: '00000000-0000-4000-8000-000000000000', resume: true },
    });
    assert.equal(unknownSession.status, 404);
    assert.equal((await t.request('GET', '/jobs?limit=500')).body.jobs.length, before);
    assert.equal((await t.request('GET', '/jobs/job-unknown')).status, 404);
    assert.equal((await t.request('DELETE', '/jobs/job-unknown')).status, 404);
    assert.equal((await t.request('GET', '/jobs?status=bogus')).status, 400);
    assert.equal((await t.request('GET', '/jobs?limit=501')).status, 400);
  });
});
