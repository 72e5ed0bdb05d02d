// Issue 28, "a finished run still holds its caller's container slot while its container is removed": a
// caller with one job running and SERVICE_MAX_CONTAINERS_PER_CALLER=2 gets its sync run's answer and at
// once spawns an agent. The answer frees the caller's slot (the run's container is still being torn down:
// the engine finishes its transcript and Podman removes it); the server's own limit keeps counting that
// container until it is gone (unit: container-slots.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth } from '../support/berth.js';

async function until<T>(check: () => Promise<T | undefined>, withinMs: number): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('a caller\'s container slots', () => {
  let t: TestBerth;

  before(async () => {
    // No pools: every container here is one of the caller's.
    t = await startTestBerth({ SERVICE_MAX_CONTAINERS_PER_CALLER: '2', SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });
  after(async () => {
    await t?.stop();
  });

  test('a sync run\'s answer frees its slot for the caller\'s next request while its container is removed', async () => {
    const job = await t.request('POST', '/run/async', { prompt: 'run: /bin/sleep 60' });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const jobId = job.body.job_id as string;
    await until(async () => ((await t.request('GET', `/jobs/${jobId}`)).body.status === 'running' ? true : undefined), 60_000);

    const run = await t.request('POST', '/run', { prompt: 'say: answered' });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    // The run's container is still there (torn down after the answer): what the caller's next request meets.
    const containersAtAnswer = (await t.berth.runtime.listContainers(`berth.run=${run.body.id as string}`)).length;
    assert.equal(containersAtAnswer, 1, 'the run\'s container is still being torn down when the caller asks again');
    const agent = await t.request('POST', '/agents', {});
    assert.equal(agent.status, 200, `POST /agents right after the answer: ${agent.status} ${JSON.stringify(agent.body)}`);

    // Now the caller holds two (the job and the agent): a third is its limit's 429.
    await t.berth.settled();
    const third = await t.request('POST', '/run', { prompt: 'say: third' });
    assert.equal(third.status, 429, JSON.stringify(third.body));

    assert.equal((await t.request('DELETE', `/agents/${agent.body.id as string}`)).status, 204);
    assert.equal((await t.request('DELETE', `/jobs/${jobId}`)).status, 200);
    await until(async () => ((await t.leftovers()).length === 0 ? true : undefined), 30_000);
  });
});
