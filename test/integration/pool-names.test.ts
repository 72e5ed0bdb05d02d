// Issue 28, "pre-started engines look like runs in progress": `podman ps` on an idle Berth shows its
// pool's engines as the pool's (named `berth-pool-…`, labelled `berth.pool=<run|agent>`), none as a run;
// a claimed engine that is still running becomes its run's (`berth-<run id>`, its run label); the grant
// sweep, the reaper and a restart's follow-up key on the run label, which every engine carries.
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
      assert.equal(engine.name, `berth-pool-${engine.run.replace(/^run-/, '')}`, 'named after the run id it will serve');
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
});
