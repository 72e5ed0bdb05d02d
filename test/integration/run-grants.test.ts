// The per-run credential's lifecycle on a real Berth (core/gateway/run-grants.ts): a credential taken from
// where code in a container finds it (its input file, its environment) is replayed against the model
// gateway at each moment it must be refused: a pre-started engine's before any caller claimed it, a run's
// once it answered, an async job's once it finished, an agent's once DELETE answered.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, afterEach, before, describe, test } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, waitForStatus } from '../support/agents.js';

const TOKEN = /key=(brt_[0-9a-f]{64})/;

describe('per-run credentials: refused until bound, refused once the run ends', { timeout: 300_000 }, () => {
  let t: TestBerth;

  /** The status the model gateway answers a model request made with `token` (from the agent network's side). */
  async function modelStatus(token: string): Promise<number> {
    const response = await fetch(`${t.berth.gateway.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'say: replayed' }] }),
    });
    await response.arrayBuffer();
    return response.status;
  }

  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '1', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_SSE_HEARTBEAT_INTERVAL: '1s' });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t?.stop();
  });

  test('a pooled engine\'s credential is refused while it waits, works for the run that claims it, and is refused once that run answered', async () => {
    const pool = t.berth.pools.run;
    for (let i = 0; pool.readyContainers().length === 0; i++) {
      assert.ok(i < 600, 'the pool has an engine ready within a minute');
      await delay(100);
    }
    const [runId] = pool.ownFiles().runIds;
    assert.ok(runId);
    const file = await readFile(join(t.config.agent.sessionsDir, '.inputs', runId, 'gateway.env'), 'utf8');
    const waiting = /^ANTHROPIC_API_KEY=(brt_[0-9a-f]{64})$/m.exec(file)?.[1];
    assert.ok(waiting, file);
    assert.equal(await modelStatus(waiting), 401, 'nobody\'s yet: refused');

    const run = await t.request('POST', '/run', { prompt: 'run: echo "key=$ANTHROPIC_API_KEY"' });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.equal(run.body.id, runId, 'the run took the pooled engine');
    assert.equal(TOKEN.exec(run.body.output)?.[1], waiting, 'the credential it held while waiting is the one its run used');
    assert.equal(await modelStatus(waiting), 401, 'refused as soon as the run answered');
  });

  test('an async job\'s credential is refused once the job is finished', async () => {
    const submitted = await t.request('POST', '/run/async', { prompt: 'run: echo "key=$ANTHROPIC_API_KEY"', engine: { model: 'claude-opus-4-1' } });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    let job: any;
    for (let i = 0; ; i++) {
      job = (await t.request('GET', `/jobs/${submitted.body.job_id}`)).body;
      if (job.status !== 'pending' && job.status !== 'running') break;
      assert.ok(i < 1200, 'the job ends within two minutes');
      await delay(100);
    }
    assert.equal(job.status, 'completed', JSON.stringify(job));
    const token = TOKEN.exec(job.output)?.[1];
    assert.ok(token, job.output);
    assert.equal(await modelStatus(token), 401);
  });

  test('an agent\'s credential works while it lives and is refused as soon as DELETE answered', async () => {
    const spawned = await t.request('POST', '/agents', { prompt: 'run: echo "key=$ANTHROPIC_API_KEY"' });
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const agent = spawned.body;
    const frames = await follow(`${t.url}/agents/${agent.id}/stream`, (seen) => seen.some((f) => f.event === 'turn_end' || f.event === 'error')).done;
    const token = frames.map((f) => TOKEN.exec(String(f.data.content ?? ''))?.[1]).find((found) => found !== undefined);
    assert.ok(token, JSON.stringify(frames));
    await waitForStatus(t, agent.id, 'idle');
    assert.equal(await modelStatus(token), 200, 'the live agent\'s credential is forwarded');
    const deleted = await t.request('DELETE', `/agents/${agent.id}`);
    assert.equal(deleted.status, 204);
    assert.equal(await modelStatus(token), 401);
  });
});
