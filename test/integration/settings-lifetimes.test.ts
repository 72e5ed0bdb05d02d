// Settings of how long things live that no other test set (issue 28), each on a real Berth with a value
// far from its default so that a setting ignored shows: SERVICE_POOL_MAX_AGE (an engine older than it is
// replaced, not claimed), SERVICE_AGENT_IDLE_TIMEOUT and SERVICE_AGENT_EXITED_RETENTION (an idle agent
// ends, its record stays readable for the retention, then is gone), SERVICE_JOB_RETENTION (a finished
// job is pruned), SERVICE_WEBHOOK_TIMEOUT and SERVICE_WEBHOOK_MAX_RETRIES (a receiver that never answers
// is given up on after that long, that many times).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { metric, poolReady, startTestBerth, type TestBerth } from '../support/berth.js';
import { waitFor } from '../support/wait.js';

async function withBerth(env: Record<string, string>, body: (t: TestBerth) => Promise<void>): Promise<void> {
  const t = await startTestBerth(env);
  try {
    await body(t);
  } finally {
    await t.stop();
  }
}

describe('settings of lifetimes', () => {
  test('SERVICE_POOL_MAX_AGE: a pre-started engine older than it is replaced, not claimed', async () => {
    await withBerth({ SERVICE_POOL_SIZE: '1', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_POOL_MAX_AGE: '2s' }, async (t) => {
      await poolReady(t, 1, 'run', 90_000);
      const [old] = t.berth.pools.ownContainerNames();
      assert.ok(old, 'the pooled engine\'s container');
      const oldId = (await t.berth.runtime.listContainers(`berth.instance=${t.config.instanceName}`)).find((c) => c.names.includes(old))?.id;
      assert.ok(oldId);
      await delay(2_500);
      const run = await t.request('POST', '/run', { prompt: 'run: hostname' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      // Podman names a container's host after its id: the run's answer says which engine it ran in.
      const hostname = String(run.body.output).trim();
      assert.match(hostname, /^[0-9a-f]{12}$/, `a container id: ${hostname}`);
      assert.ok(!oldId.startsWith(hostname), 'the run did not run in the old engine');
      await waitFor('the old engine removed', async () =>
        !(await t.berth.runtime.listContainers(`berth.instance=${t.config.instanceName}`)).some((c) => c.id === oldId) || undefined, 20_000);
    });
  });

  test('SERVICE_AGENT_IDLE_TIMEOUT ends an idle agent; SERVICE_AGENT_EXITED_RETENTION keeps its record that long, then it is gone', async () => {
    await withBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_AGENT_IDLE_TIMEOUT: '3s', SERVICE_AGENT_IDLE_TICK: '500ms', SERVICE_AGENT_EXITED_RETENTION: '3s' }, async (t) => {
      const spawned = await t.request('POST', '/agents', {});
      assert.ok(spawned.status === 200 || spawned.status === 201, JSON.stringify(spawned.body));
      const id: string = spawned.body.id ?? spawned.body.agent_id;
      await waitFor('the agent idle', async () => (await t.request('GET', `/agents/${id}`)).body.status === 'idle' || undefined, 60_000);
      const exited = await waitFor('the agent ended by its idle timeout', async () => {
        const agent = await t.request('GET', `/agents/${id}`);
        return agent.body.status === 'exited' ? agent.body : undefined;
      }, 30_000, 200);
      assert.equal(exited.exit_error, 'agent: idle timeout reached');
      assert.equal(exited.idle_timeout_seconds, 3, 'the spawn named none: SERVICE_AGENT_IDLE_TIMEOUT applies');
      // The agent's own clock: idle since its last activity, ended at least 3 s later.
      const lastActivity = Date.parse(exited.last_activity_at);
      assert.ok(Date.now() - lastActivity >= 2_900, `idle for the timeout first (${Date.now() - lastActivity} ms)`);
      const seenExited = Date.now();
      await waitFor('the exited agent forgotten', async () => (await t.request('GET', `/agents/${id}`)).status === 404 || undefined, 30_000, 200);
      // Seen exited up to a poll late (longer on a loaded machine); without the retention it would be gone at the next 0.5 s tick.
      const readableFor = Date.now() - seenExited;
      assert.ok(readableFor >= 1_500, `readable as exited for the retention (3 s), then gone: ${readableFor} ms`);
      assert.deepEqual(await t.leftovers(), []);
    });
  });

  test('SERVICE_JOB_RETENTION prunes a finished job', async () => {
    await withBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_JOB_RETENTION: '2s' }, async (t) => {
      const job = await t.request('POST', '/run/async', { prompt: 'say: soon forgotten' });
      assert.equal(job.status, 200, JSON.stringify(job.body));
      const id: string = job.body.job_id;
      await waitFor('the job finished', async () => (await t.request('GET', `/jobs/${id}`)).body.status === 'completed' || undefined, 60_000, 200);
      const finishedAt = Date.now();
      await waitFor('the job pruned', async () => (await t.request('GET', `/jobs/${id}`)).status === 404 || undefined, 20_000, 200);
      assert.ok(Date.now() - finishedAt < 15_000);
    });
  });

  test('SERVICE_WEBHOOK_TIMEOUT cuts an attempt that gets no answer; SERVICE_WEBHOOK_MAX_RETRIES bounds the attempts', async () => {
    // A receiver that accepts each delivery and never answers it; each attempt's duration is how long Berth waited.
    const attempts: { startedAt: number; closedAt?: number }[] = [];
    const receiver: Server = createServer((req) => {
      const attempt: { startedAt: number; closedAt?: number } = { startedAt: Date.now() };
      attempts.push(attempt);
      req.socket.once('close', () => (attempt.closedAt = Date.now()));
      req.resume();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const port = (receiver.address() as AddressInfo).port;
      await withBerth({
        SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
        SERVICE_WEBHOOK_TIMEOUT: '1s', SERVICE_WEBHOOK_MAX_RETRIES: '2', SERVICE_WEBHOOK_RETRY_BASE_DELAY: '100ms',
      }, async (t) => {
        const job = await t.request('POST', '/run/async', { prompt: 'say: hooked', webhook_url: `http://127.0.0.1:${port}/hook` });
        assert.equal(job.status, 200, JSON.stringify(job.body));
        await waitFor('three attempts, each cut', async () => (attempts.length >= 3 && attempts.every((a) => a.closedAt !== undefined)) || undefined, 60_000, 100);
        // The next retry would come 0.4 s after the third attempt's 1 s: wait well past it.
        await delay(3_000);
        assert.equal(attempts.length, 3, 'the first attempt and SERVICE_WEBHOOK_MAX_RETRIES=2 retries, no more');
        for (const attempt of attempts) {
          const waited = attempt.closedAt! - attempt.startedAt;
          assert.ok(waited >= 800 && waited < 4_000, `an attempt is cut after SERVICE_WEBHOOK_TIMEOUT (1 s): ${waited} ms`);
        }
        assert.equal(await metric(t, 'berth_webhook_deliveries_total{outcome="failed"}'), 1, 'the delivery gave up');
      });
    } finally {
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});
