// Issue 28, "pre-started engines look like runs in progress": `podman ps` on an idle Berth shows its
// pool's engines as the pool's (named `berth-pool-…`, labelled `berth.pool=<run|agent>`), none as a run;
// a claimed engine that is still running becomes its run's (`berth-<run id>`, its run label), and one of the
// agents' pool its agent's, named and labelled as a fresh agent's container (`berth-agent-…`, nothing of it
// saying `run`); the grant sweep, the reaper and a restart's follow-up key on the run label, which every
// engine carries.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { metric, poolReady, startTestBerth, type TestBerth } from '../support/berth.js';
import { waitFor } from '../support/wait.js';

const exec = promisify(execFile);

interface Listed {
  readonly name: string;
  readonly run: string;
  readonly pool: string;
}

/** The instance's containers as `podman ps` lists them, with the run and pool labels. */
async function podmanPs(instance: string, filter?: string): Promise<Listed[]> {
  const { stdout } = await exec('podman', [
    'ps', '--filter', `label=berth.instance=${instance}`, ...(filter ? ['--filter', filter] : []),
    '--format', '{{.Names}}\t{{index .Labels "berth.run"}}\t{{index .Labels "berth.pool"}}',
  ]);
  return stdout.split('\n').filter(Boolean).map((line) => {
    const [name = '', run = '', pool = ''] = line.split('\t');
    return { name, run, pool };
  });
}

describe('the pool as podman ps shows it', () => {
  let t: TestBerth;

  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '2', SERVICE_AGENT_POOL_SIZE: '1' });
    await poolReady(t, 2, 'run', 120_000);
    await poolReady(t, 1, 'agent', 120_000);
  });
  after(async () => {
    await t?.stop();
  });

  test('an idle Berth lists its pre-started engines as the pool\'s, none as a run', async () => {
    const listed = await podmanPs(t.config.instanceName);
    assert.equal(listed.length, 3, JSON.stringify(listed));
    for (const engine of listed) {
      assert.match(engine.name, /^berth-pool-[0-9a-f-]{36}$/, JSON.stringify(engine));
      assert.equal(engine.name, `berth-pool-${engine.run.replace(/^(run|agent)-/, '')}`, 'named after the id it will serve');
      assert.match(engine.run, engine.pool === 'agent' ? /^agent-/ : /^run-/, 'an agent\'s engine is started under its agent\'s id');
    }
    assert.deepEqual(listed.map((e) => e.pool).sort(), ['agent', 'run', 'run']);
    assert.deepEqual(await podmanPs(t.config.instanceName, 'name=^berth-run-'), [], 'no run in progress');
    // What the test support's leak check relies on: the pool names what it holds, as Podman lists it.
    assert.deepEqual(new Set(t.berth.pools.ownContainerNames()), new Set(listed.map((e) => e.name)));
  });

  test('a claimed engine still running is listed as its run\'s', async () => {
    const hits = await metric(t, 'berth_pool_hits_total{pool="run"}');
    const job = await t.request('POST', '/run/async', { prompt: 'run: /bin/sleep 30' });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const jobId = job.body.job_id as string;
    const claimed = await waitFor('the claimed engine to take its run\'s name', async () => {
      const runs = await podmanPs(t.config.instanceName, 'name=^berth-run-');
      return runs.length === 1 ? runs[0] : undefined;
    }, 30_000);
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="run"}'), hits + 1, 'the job took a pooled engine');
    assert.equal(claimed.name, `berth-${claimed.run}`, 'named as engineContainer() names a run');
    assert.equal(claimed.pool, 'run', 'pre-started by the pool (labels cannot change)');
    assert.ok(!t.berth.pools.ownContainerNames().includes(claimed.name), 'no longer the pool\'s');
    // The others are still the pool's.
    for (const engine of (await podmanPs(t.config.instanceName)).filter((e) => e.name !== claimed.name)) {
      assert.match(engine.name, /^berth-pool-/, JSON.stringify(engine));
    }
    assert.equal((await t.request('DELETE', `/jobs/${jobId}`)).status, 200);
    await waitFor('nothing left but the pool', async () => ((await t.leftovers()).length === 0 ? true : undefined), 30_000);
  });

  test('a claimed engine of the agents\' pool is listed as its agent\'s, as a fresh agent\'s container is', async () => {
    await poolReady(t, 1, 'agent', 120_000);
    const hits = await metric(t, 'berth_pool_hits_total{pool="agent"}');
    const pooled = await t.request('POST', '/agents', {});
    assert.equal(pooled.status, 200, JSON.stringify(pooled.body));
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="agent"}'), hits + 1, 'the agent took a pooled engine');
    // Another workdir than the pool's: a fresh agent container, to compare with.
    const misses = await metric(t, 'berth_pool_misses_total{pool="agent",reason="workdir"}');
    const fresh = await t.request('POST', '/agents', { workdir: '/tmp' });
    assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
    assert.equal(await metric(t, 'berth_pool_misses_total{pool="agent",reason="workdir"}'), misses + 1, 'the second agent is a fresh one');
    const ids = [pooled.body.id as string, fresh.body.id as string];
    const listed = await waitFor('both agents\' containers under their agents\' names', async () => {
      const agents = await podmanPs(t.config.instanceName, 'name=^berth-agent-');
      return agents.length === 2 ? agents : undefined;
    }, 30_000);
    for (const id of ids) {
      const container = listed.find((e) => e.run === id);
      assert.ok(container, `${id} in ${JSON.stringify(listed)}`);
      assert.equal(container.name, `berth-${id}`, 'named as engineContainer() names an agent');
      assert.doesNotMatch(`${container.name} ${container.run}`, /run/, 'nothing of it says run');
    }
    assert.equal(listed.find((e) => e.run === ids[0])!.pool, 'agent', 'pre-started by the agents\' pool (labels cannot change)');
    assert.deepEqual(await podmanPs(t.config.instanceName, 'name=^berth-run-'), [], 'no run in progress');
    for (const id of ids) assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
    await waitFor('nothing left but the pool', async () => ((await t.leftovers()).length === 0 ? true : undefined), 30_000);
  });
});
