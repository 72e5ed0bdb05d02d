// Async jobs end to end: real Podman, the real engine, the offline model. The last suite runs Berth as a
// child process so that it can be killed with SIGKILL mid-job and started again on the same data.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { startTestBerth, testEnvironment, type TestBerth } from '../support/berth.js';

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

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(everyMs);
  }
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
    await delay(500);
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

describe('jobs across a service that dies or stops', () => {
  const instance = `test-kill-${randomBytes(4).toString('hex')}`;
  let dir: string;
  let child: ChildProcess | undefined;
  let url: string;
  let output = '';

  const containers = () =>
    execFileSync('podman', ['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.trim() !== '');

  async function freePort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }

  /** Starts `node --import tsx src/main.ts` in its own process group and waits until it answers. */
  async function startService(): Promise<void> {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: join(import.meta.dirname, '../..'),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...testEnvironment(dir, instance, port),
        SERVICE_OFFLINE_MODEL: 'false',
        SERVICE_ENGINE_CREDENTIALS_SECRET: modelSecret,
        SERVICE_ENGINE_BASE_URL: `http://host.containers.internal:${model.port}`,
        // This suite counts the containers a killed process leaves; pre-started engines would be among them.
        SERVICE_POOL_SIZE: '0',
      },
    });
    child.stdout!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
    child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
    const current = child;
    await waitFor('the service to answer', async () => {
      if (current.exitCode !== null) throw new Error(`the service exited with ${current.exitCode}: ${output}`);
      try {
        return (await fetch(`${url}/health`)).ok;
      } catch {
        return undefined;
      }
    }, 90_000, 200);
  }

  /**
   * A signal to the service's whole process group. Its `podman system service` runs in a group of its own:
   * after a SIGKILL it is left behind, and the next start (or after()) stops it through its pid file.
   */
  async function killService(signal: NodeJS.Signals): Promise<void> {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise((resolve) => current.once('exit', resolve));
    process.kill(-current.pid!, signal);
    await Promise.race([exited, delay(30_000, undefined, { ref: false })]);
    if (signal !== 'SIGKILL') {
      // The service is gone; make sure nothing of its group is left either.
      try {
        process.kill(-current.pid!, 'SIGKILL');
      } catch {
        // The group has already exited.
      }
    }
  }

  /** The job once it is final, as the restarted service reports it. */
  const finishedJob = (id: string) =>
    waitFor(`job ${id} to finish after the restart`, async () => {
      const body = (await api('GET', `/jobs/${id}`)).body;
      return FINISHED.has(body.status) ? body : undefined;
    }, 60_000);

  /** A job's row in the (stopped) service's own job database, for what the API does not show. */
  const jobRecord = async (id: string) => {
    const db = new Database(join(dir, 'data', 'jobs.db'), { readonly: true });
    try {
      return db.prepare('SELECT run_id FROM jobs WHERE id = ?').get(id) as { run_id: string };
    } finally {
      db.close();
    }
  };

  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  // The model lives outside the service, as a real model endpoint does: a run in progress keeps talking to it
  // while the service is killed and started again (the embedded offline model would die with the service).
  let model: OfflineModel;
  const modelKey = `sk-berth-test-${randomBytes(12).toString('hex')}`;
  const modelSecret = `test-kill-model-key-${randomBytes(4).toString('hex')}`;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-kill-'));
    model = await startOfflineModel({ host: '0.0.0.0', port: 0, apiKey: modelKey });
    execFileSync('sh', ['-c', `printf '%s' "$KEY" | podman secret create ${modelSecret} -`], { env: { ...process.env, KEY: modelKey } });
  });
  after(async () => {
    await killService('SIGKILL');
    // Whatever a killed service of this instance left: its containers and the holder of its engine mount.
    const holders = execFileSync('podman', ['ps', '-aq', '--filter', `label=berth.image-tree=${instance}`], { encoding: 'utf8' });
    for (const id of [...containers(), ...holders.split('\n').filter(Boolean)]) {
      try {
        execFileSync('podman', ['rm', '-f', id], { stdio: 'ignore' });
      } catch {
        // Already gone, or a busy shm mount Podman removes all the same.
      }
    }
    await model?.close();
    try {
      execFileSync('podman', ['secret', 'rm', modelSecret], { stdio: 'ignore' });
    } catch {
      // Already gone.
    }
    try {
      process.kill(Number(await readFile(join(dir, 'data', 'podman', 'podman.pid'), 'utf8')), 'SIGTERM');
    } catch {
      // No Podman service left behind.
    }
    await rm(dir, { recursive: true, force: true });
  });

  test('after a kill -9 a job whose container still runs is followed again and completes with its full output', async () => {
    await startService();
    const submitted = await api('POST', '/run/async', { prompt: 'say: before the kill\nrun: /bin/sleep 8\nsay: survived the restart' });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    const jobId: string = submitted.body.job_id;
    await waitFor('the job container to run', async () => (await api('GET', `/jobs/${jobId}`)).body.status === 'running' && containers().length === 1);
    await delay(2_500); // the engine reaches its Bash tool: the sleep is running inside the container

    await killService('SIGKILL');
    assert.equal(containers().length, 1, 'the container outlives the killed service');

    await startService();
    const done = await finishedJob(jobId);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.match(done.output, /before the kill[\s\S]*survived the restart/, 'the whole output, from before and after the restart');
    const messages = await api('GET', `/sessions/${submitted.body.session_id}/messages?limit=500`);
    assert.equal(messages.status, 200, 'the session kept its transcript');
    assert.ok(messages.body.messages.some((m: { content: string }) => m.content.includes('survived the restart')));
    await waitFor('the container to be removed', async () => containers().length === 0 || undefined);
  });

  test('a job whose container exited while the service was down is finished from its log; one whose container is gone crashes', async () => {
    if (!child || child.exitCode !== null) await startService();
    const quick = await api('POST', '/run/async', { prompt: 'run: /bin/sleep 3\nsay: finished while nobody watched' });
    const lost = await api('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    const [quickId, lostId] = [quick.body.job_id as string, lost.body.job_id as string];
    await waitFor('both job containers to run', async () => containers().length === 2 || undefined);
    await delay(2_000);
    await killService('SIGKILL');
    // While the service is down: one container ends by itself, the other is removed by someone else.
    const lostContainer = `berth-${(await jobRecord(lostId)).run_id}`;
    try {
      execFileSync('podman', ['rm', '-f', lostContainer], { stdio: 'ignore' });
    } catch {
      // Podman 4.3 may report a busy shm mount of a user-namespaced container it removes all the same.
    }
    await waitFor('the container to be gone', async () => !containers().includes(lostContainer) || undefined);
    await delay(3_000);

    await startService();
    const quickDone = await finishedJob(quickId);
    assert.equal(quickDone.status, 'completed', JSON.stringify(quickDone));
    assert.match(quickDone.output, /finished while nobody watched/);
    const lostDone = (await api('GET', `/jobs/${lostId}`)).body;
    assert.equal(lostDone.status, 'crashed', JSON.stringify(lostDone));
    assert.deepEqual(lostDone.crash_info, { exit_code: -1, signal: '', partial_output: '', task_completed: false, reason: 'service_restart' });
    assert.match(lostDone.error, /container was gone/);
    assert.equal((await api('DELETE', `/jobs/${lostId}`)).status, 409);
    await waitFor('no container left', async () => containers().length === 0 || undefined);
  });

  test('a sync run cut off by a kill -9 keeps what the engine wrote in its session, to be resumed', async () => {
    if (!child || child.exitCode !== null) await startService();
    const marker = `cut-off-${randomBytes(4).toString('hex')}`;
    const before = new Set(((await api('GET', '/sessions')).body.sessions as { id: string }[]).map((session) => session.id));
    const pending = fetch(`${url}/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: `say: ${marker}\nrun: /bin/sleep 600` }),
    }).catch(() => undefined);
    await waitFor('the run container to run', async () => containers().length === 1 || undefined);
    await delay(2_500);
    await killService('SIGKILL');
    await pending;

    await startService();
    assert.deepEqual(containers(), [], 'a sync run is not followed again: its container is reaped');
    const sessions = ((await api('GET', '/sessions')).body.sessions as { id: string }[]).filter((session) => !before.has(session.id));
    assert.equal(sessions.length, 1, 'the run\'s session is there');
    const messages = await api('GET', `/sessions/${sessions[0]!.id}/messages?limit=500`);
    assert.ok(messages.body.messages.some((m: { content: string }) => m.content.includes(marker)), 'with what the engine wrote before the kill');
    const resumed = await api('POST', '/run', { prompt: 'recall:', engine: { session_id: sessions[0]!.id, resume: true } });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.match(resumed.body.output, new RegExp(marker));
  });

  test('a graceful stop removes a running job\'s container and records the job as crashed by the stop', async () => {
    if (!child || child.exitCode !== null) await startService();
    const submitted = await api('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    const jobId: string = submitted.body.job_id;
    await waitFor('the job container to run', async () => (await api('GET', `/jobs/${jobId}`)).body.status === 'running' && containers().length === 1);
    await delay(2_500);

    const stopping = Date.now();
    await killService('SIGTERM');
    assert.ok(Date.now() - stopping < 20_000, `stopping took ${Date.now() - stopping} ms`);
    assert.deepEqual(containers(), [], 'the stopping service removed the container itself');

    await startService();
    const stopped = (await api('GET', `/jobs/${jobId}`)).body;
    assert.equal(stopped.status, 'crashed', JSON.stringify(stopped));
    assert.equal(stopped.crash_info.reason, 'service_stop');
    assert.match(stopped.error, /service stopped while the job was running/);
    await killService('SIGTERM');
    assert.deepEqual(containers(), []);
  });
});
