// What the README promises about an engine's container, read by the code running in it (issue 28): a
// `run:` directive makes the real engine run a command in its container, which prints its own
// /proc/self/status (capability sets, NoNewPrivs), uid_map and cgroup files, and tries to fork past the
// pids limit. container-policy.test.ts inspects containers from the host; this file asks the processes.
// The Berth is configured away from every default it checks, so a setting ignored is a setting seen.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { poolReady, startTestBerth, type TestBerth } from '../support/berth.js';

const PIDS_LIMIT = 200;
const CPU_SHARES = 300;
const USERNS_BASE = 710_000_000;
const FILE_OWNER_UID = 1500;

/** Runs in the container; one `key=value` or /proc line per fact. The fork loop ends at the pids limit. */
const PROBE = [
  'grep -E "^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)" /proc/self/status',
  'echo "uid_map=$(head -1 /proc/self/uid_map)"',
  'echo "pids.max=$(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max)"',
  'echo "cpu.shares=$(cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || echo none)"',
  'sh -c \'i=0; while [ $i -lt 400 ]; do sleep 60 >/dev/null 2>&1 & i=$((i+1)); done\' 2>&1 | head -1',
  'echo "pids.current=$(cat /sys/fs/cgroup/pids/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids.current)"',
  'pkill sleep; echo probed',
].join('; ');

interface Seen {
  readonly output: string;
  field(name: string): string;
}

function seen(output: string): Seen {
  return {
    output,
    field(name) {
      // /proc/self/status separates with a tab; the engine's tool output may show it escaped.
      const match = new RegExp(`^${name.replace('.', '\\.')}(?::|=)(?:\\s|\\\\t)*(.*)$`, 'm').exec(output);
      assert.ok(match, `${name} in the container's answer: ${output}`);
      return match[1]!.trim();
    },
  };
}

function assertHardened(what: string, probe: Seen): void {
  for (const set of ['CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
    // The bounding set is what any process (a setuid binary included) could still gain: empty.
    assert.equal(BigInt(`0x${probe.field(set)}`), 0n, `${what}: ${set} holds no capability`);
  }
  assert.equal(probe.field('NoNewPrivs'), '1', `${what}: no-new-privileges`);
  assert.equal(probe.field('pids.max'), String(PIDS_LIMIT), `${what}: the pids cgroup holds SERVICE_AGENT_PIDS_LIMIT`);
  const current = Number(probe.field('pids.current'));
  assert.ok(current <= PIDS_LIMIT, `${what}: 400 forks stopped at the limit (${current} processes)`);
  assert.match(probe.output, /Cannot fork|Resource temporarily unavailable/, `${what}: the fork past the limit failed`);
  assert.equal(probe.field('cpu.shares'), String(CPU_SHARES), `${what}: SERVICE_AGENT_DEFAULT_CPU_SHARES is the cgroup's weight`);
  assert.deepEqual(probe.field('uid_map').split(/\s+/), ['0', String(USERNS_BASE), '65536'], `${what}: container root is host uid SERVICE_AGENT_USERNS_BASE`);
}

describe('a live engine container, seen from inside', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({
      SERVICE_POOL_SIZE: '1',
      SERVICE_AGENT_POOL_SIZE: '0',
      SERVICE_AGENT_PIDS_LIMIT: String(PIDS_LIMIT),
      SERVICE_AGENT_DEFAULT_CPU_SHARES: String(CPU_SHARES),
      SERVICE_AGENT_USERNS_BASE: String(USERNS_BASE),
      SERVICE_WORKSPACE_FILE_OWNER_UID: String(FILE_OWNER_UID),
      SERVICE_WORKSPACE_MAX_BYTES: '64m',
    });
  });
  after(async () => {
    await t?.stop();
  });

  test('a pooled engine\'s run: no capabilities, no-new-privileges, the pids limit, the cpu weight, the user namespace', async () => {
    await poolReady(t, 1);
    const run = await t.request('POST', '/run', { prompt: `run: ${PROBE}` });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assertHardened('pooled run', seen(run.body.output));
    assert.deepEqual(await t.leftovers(), []);
  });

  test('a fresh container\'s run: the same', async () => {
    // Its own memory limit: no pooled engine matches, the run starts a container of its own.
    const run = await t.request('POST', '/run', { prompt: `run: ${PROBE}`, container: { memory: '384m' } });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.ok(!('pooled' in run.body) || run.body.pooled === false, 'not a pooled engine');
    assertHardened('fresh run', seen(run.body.output));
    assert.deepEqual(await t.leftovers(), []);
  });

  test('files Berth writes into a workspace belong to SERVICE_WORKSPACE_FILE_OWNER_UID in the container', async () => {
    const created = await t.request('POST', '/workspaces', {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.id;
    try {
      const put = await fetch(`${t.url}/workspaces/${id}/files/notes.txt`, { method: 'PUT', body: 'uploaded\n' });
      assert.ok(put.ok, `upload: ${put.status} ${await put.text()}`);
      const run = await t.request('POST', '/run', { prompt: 'run: stat -c "owner=%u:%g" notes.txt', workspace: id });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(seen(run.body.output).field('owner'), `${FILE_OWNER_UID}:${FILE_OWNER_UID}`);
    } finally {
      await t.request('DELETE', `/workspaces/${id}`);
    }
  });
});
