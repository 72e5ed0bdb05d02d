// Findings 6 and 12, performed against a real Berth on real Podman: a caller reaches Berth's own
// credential secret by its id or an id prefix; a process on the host talks to the offline model.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);

describe('reserved secrets and the offline model', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth();
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t?.stop();
  });

  test('Berth\'s own credential secret cannot be reached by its id or an id prefix', async () => {
    const reserved = t.berth.engineAccess.current().secretName;
    assert.match(reserved, /^berth-offline-model-key-/);
    const { stdout } = await exec('podman', ['secret', 'inspect', '--format', '{{.ID}}', reserved]);
    const id = stdout.trim();
    assert.match(id, /^[0-9a-f]{10,}$/);
    for (const reference of [id, id.slice(0, 12), id.slice(0, 3), reserved]) {
      const response = await t.request('POST', '/run', { prompt: 'run: cat /run/berth/env/X', container: { secrets_env: { X: reference } } });
      assert.equal(response.status, 400, `${reference}: ${JSON.stringify(response.body)}`);
      assert.equal(response.body.status, 'error');
      assert.match(response.body.error, /secrets_env/);
    }
  });

  test('volume relabelling (z/Z) is refused without the operator switch, before any container', async () => {
    for (const option of ['z', 'Z']) {
      const response = await t.request('POST', '/run', { prompt: 'hi', container: { volumes: [`/tmp:/mnt/x:${option}`] } });
      assert.equal(response.status, 400, JSON.stringify(response.body));
      assert.match(response.body.error, /container\.volumes\[0\].*SERVICE_AGENT_ALLOW_RELABEL/);
    }
  });

  test('the offline model admits the agent network only: a host process is cut off, containers still reach it', async () => {
    const port = Number(new URL(t.berth.engineAccess.current().baseUrl).port);
    const fromHost = await fetch(`http://127.0.0.1:${port}/v1/messages`, { method: 'POST', body: '{}' }).then(
      (response) => `answered ${response.status}`,
      (error: Error) => `refused: ${(error.cause as Error | undefined)?.message ?? error.message}`,
    );
    assert.match(fromHost, /^refused/, fromHost);
    const run = await t.request('POST', '/run', { prompt: 'say: still reachable' });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.equal(run.body.output, 'still reachable');
  });
});
