// SERVICE_AGENT_EXITED_RETENTION is the one retention of an exited agent's record, across a restart too:
// the next process lists again what exited within it, and forgets at start what exited before it (it used
// a 24 h of its own there, so a record past the setting came back after every restart until the
// watchdog's next tick). Three Berths in turn on the same data and session directories.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { test } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { waitForStatus } from '../support/agents.js';
import { removeTestDir } from '../support/test-dir.js';

test('an exited agent is listed again after a restart within SERVICE_AGENT_EXITED_RETENTION, and not after it', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-agent-retention-'));
  const env = (retention: string) => ({
    SERVICE_DATA_DIR: join(dir, 'data'),
    SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
    SERVICE_POOL_SIZE: '0',
    SERVICE_AGENT_POOL_SIZE: '0',
    // The watchdog, which forgets exited agents too, does not tick during the test: only the start decides.
    SERVICE_AGENT_IDLE_TICK: '10m',
    SERVICE_AGENT_EXITED_RETENTION: retention,
  });
  const during = async (retention: string, body: (t: TestBerth) => Promise<void>) => {
    const t = await startTestBerth(env(retention));
    try {
      await body(t);
      assert.deepEqual(await t.leftovers(), []);
    } finally {
      await t.stop();
    }
  };
  try {
    let id = '';
    let exitedAt = 0;
    await during('1h', async (t) => {
      const spawned = await t.request('POST', '/agents', {});
      assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
      id = spawned.body.id;
      await waitForStatus(t, id, 'idle');
      assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
      exitedAt = Date.now();
      assert.equal((await t.request('GET', `/agents/${id}`)).body.status, 'exited');
    });
    await during('1h', async (t) => {
      const agent = await t.request('GET', `/agents/${id}`);
      assert.equal(agent.status, 200, 'exited within the retention: listed again');
      assert.deepEqual([agent.body.status, agent.body.exit_error], ['exited', 'agent: stopped by DELETE /agents/:id']);
    });
    await delay(Math.max(0, exitedAt + 2_000 - Date.now()));
    await during('1s', async (t) => {
      const agent = await t.request('GET', `/agents/${id}`);
      assert.equal(agent.status, 404, `exited longer ago than the retention: forgotten at start (${JSON.stringify(agent.body)})`);
    });
  } finally {
    await removeTestDir(dir);
  }
});
