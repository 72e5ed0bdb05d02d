// Finding 9, performed against a real Berth on real Podman: one caller tries to hold every container of
// the host. Runs, streams and agents count together against SERVICE_MAX_CONTAINERS_PER_CALLER (429) and
// SERVICE_MAX_CONTAINERS (503); async jobs wait for a slot instead of being refused.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';

describe('container caps', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], { SERVICE_MAX_CONTAINERS: '3', SERVICE_MAX_CONTAINERS_PER_CALLER: '2' }));
  });
  after(async () => {
    await t?.stop();
  });

  test('per caller 429, server-wide 503, jobs wait, and everything frees its slot', async () => {
    const agents: string[] = [];
    for (let i = 0; i < 2; i++) {
      const spawned = await t.request('POST', '/agents', {}, as('alice'));
      assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
      agents.push(spawned.body.id);
    }
    const third = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(third.status, 429, JSON.stringify(third.body));
    assert.match(third.body.error, /SERVICE_MAX_CONTAINERS_PER_CALLER/);
    const run = await t.request('POST', '/run', { prompt: 'say: one more' }, as('alice'));
    assert.equal(run.status, 429);
    const stream = await fetch(`${t.url}/run/stream?prompt=hi`, { headers: as('alice') });
    assert.equal(stream.status, 429, 'a stream is refused before it starts');
    assert.deepEqual(await stream.json(), { error: run.body.error, status: 'error' });

    const job = await t.request('POST', '/run/async', { prompt: 'say: queued behind the cap' }, as('alice'));
    assert.equal(job.status, 200, 'a job is accepted and waits for a slot');
    await delay(1500);
    assert.equal((await t.request('GET', `/jobs/${job.body.job_id}`, undefined, as('alice'))).body.status, 'pending');

    const bobAgent = await t.request('POST', '/agents', {}, as('bob'));
    assert.equal(bobAgent.status, 200, 'another caller still has room');
    const full = await t.request('POST', '/run', { prompt: 'say: full' }, as('bob'));
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.match(full.body.error, /SERVICE_MAX_CONTAINERS\)/);
    assert.equal((await t.leftovers()).length, 3, 'never more containers than SERVICE_MAX_CONTAINERS');

    assert.equal((await t.request('DELETE', `/agents/${agents[0]}`, undefined, as('alice'))).status, 204);
    for (let i = 0; ; i++) {
      const status = (await t.request('GET', `/jobs/${job.body.job_id}`, undefined, as('alice'))).body.status;
      if (status === 'completed') break;
      assert.ok(i < 60 && (status === 'pending' || status === 'running'), `job ended ${status}`);
      await delay(250);
    }
    assert.equal((await t.request('DELETE', `/agents/${agents[1]}`, undefined, as('alice'))).status, 204);
    assert.equal((await t.request('DELETE', `/agents/${bobAgent.body.id}`, undefined, as('bob'))).status, 204);
    const afterwards = await t.request('POST', '/run', { prompt: 'say: room again' }, as('alice'));
    assert.equal(afterwards.status, 200, JSON.stringify(afterwards.body));
    for (let i = 0; (await t.leftovers()).length > 0; i++) {
      assert.ok(i < 40, 'agent containers are removed');
      await delay(250);
    }
  });
});
