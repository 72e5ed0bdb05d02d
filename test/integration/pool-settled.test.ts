// A pre-started engine counts as ready (berth_pool_ready) only once its own start-up work is over: after
// its warm-up an engine keeps using the CPU for a while (its session's files, its start-up tasks), and a run
// that claimed one then shared the CPUs with engines still busy. Read here from the host's /proc, as an
// operator would: over the second after the pool reports itself full, every ready engine is quiet.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { poolReady, startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);

/** CPU seconds (user + system) the process has used, from /proc/<pid>/stat (USER_HZ 100). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

let t: TestBerth;

before(async () => {
  t = await startTestBerth({ SERVICE_POOL_SIZE: '3', SERVICE_AGENT_POOL_SIZE: '0' });
});

after(async () => {
  await t.stop();
});

test('engines the pool counts as ready have finished their start-up work', async () => {
  await poolReady(t, 3, 'run', 120_000);
  const ready = t.berth.pools.run.readyContainers();
  assert.equal(ready.length, 3);
  const pids = await Promise.all(
    ready.map(async (id) => Number((await exec('podman', ['inspect', '--format', '{{.State.Pid}}', id])).stdout.trim())),
  );
  const before = await Promise.all(pids.map(cpuSeconds));
  await delay(1_000);
  const used = (await Promise.all(pids.map(cpuSeconds))).map((seconds, index) => seconds - before[index]!);
  // Still settling, an engine used 0.1-0.15 s in its first second after the warm-up (2-core host); settled,
  // 0-0.02 s.
  for (const seconds of used) assert.ok(seconds < 0.06, `a ready engine used ${seconds.toFixed(2)} s of CPU in the second after the pool was full (${used.join(', ')})`);
});
