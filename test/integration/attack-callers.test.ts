// Finding 4, performed against a real Berth on real Podman: two callers with two tokens. Everything a
// caller creates — sessions, jobs, agents — is invisible to the other on every endpoint (404, never listed),
// and `continue` chooses among the caller's own sessions only.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers, endpointsOfOwnedWork } from '../support/callers.js';

describe('two callers on one Berth', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;

  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob']));
  });
  after(async () => {
    await t?.stop();
  });

  test('sessions, jobs and agents of one caller do not exist for the other', async () => {
    const run = await t.request('POST', '/run', { prompt: 'say: alice private note', workdir: '/work/shared' }, as('alice'));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const session = run.body.session_id as string;
    const job = await t.request('POST', '/run/async', { prompt: 'say: alice job' }, as('alice'));
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const agent = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(agent.status, 200, JSON.stringify(agent.body));
    const agentId = agent.body.id as string;

    const hidden = endpointsOfOwnedWork(session, job.body.job_id, agentId);
    for (const [method, path, body] of hidden) {
      const response = await t.request(method, path, body, as('bob'));
      assert.equal(response.status, 404, `bob ${method} ${path}: ${JSON.stringify(response.body)}`);
      assert.equal(response.body.status, 'error');
    }
    const lists = {
      sessions: (await t.request('GET', '/sessions', undefined, as('bob'))).body.sessions,
      jobs: (await t.request('GET', '/jobs', undefined, as('bob'))).body.jobs,
      agents: (await t.request('GET', '/agents', undefined, as('bob'))).body.agents,
    };
    assert.deepEqual(lists, { sessions: [], jobs: [], agents: [] }, 'bob lists nothing of alice\'s');

    // continue picks among bob's own sessions: none in this workdir, so a new one, never alice's.
    const continued = await t.request('POST', '/run', { prompt: 'recall:', workdir: '/work/shared', engine: { continue: true } }, as('bob'));
    assert.equal(continued.status, 200, JSON.stringify(continued.body));
    assert.notEqual(continued.body.session_id, session);
    assert.doesNotMatch(continued.body.output, /alice private note/);

    // Alice still has all of it.
    assert.equal((await t.request('GET', `/sessions/${session}/messages`, undefined, as('alice'))).status, 200);
    assert.deepEqual((await t.request('GET', '/sessions', undefined, as('alice'))).body.sessions.map((s: { id: string }) => s.id).includes(session), true);
    assert.equal((await t.request('GET', `/jobs/${job.body.job_id}`, undefined, as('alice'))).status, 200);
    assert.deepEqual((await t.request('GET', '/agents', undefined, as('alice'))).body.agents.map((a: { id: string }) => a.id), [agentId]);
    const resumed = await t.request('POST', '/run', { prompt: 'recall:', engine: { session_id: session, resume: true } }, as('alice'));
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.match(resumed.body.output, /alice private note/);
    assert.equal((await t.request('DELETE', `/agents/${agentId}`, undefined, as('alice'))).status, 204);
  });
});
