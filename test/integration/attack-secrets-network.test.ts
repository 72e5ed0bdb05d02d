// Findings 6 and 12, performed against a real Berth on real Podman: a caller reaches a secret of Berth's own
// namespace by its id or an id prefix; a process on the host talks to the offline model without its key.
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

  test('a secret of Berth\'s own namespace cannot be reached by its name, its id or an id prefix', async () => {
    // (The model's credential is no Podman secret of Berth's any more: the gateway holds it. The berth-
    // namespace stays reserved, for the operator's credential secret and whatever Berth keeps there.)
    const reserved = `berth-test-reserved-${process.pid}-${Date.now()}`;
    await exec('sh', ['-c', `printf 'not for callers' | podman secret create ${reserved} -`]);
    try {
      const { stdout } = await exec('podman', ['secret', 'inspect', '--format', '{{.ID}}', reserved]);
      const id = stdout.trim();
      assert.match(id, /^[0-9a-f]{10,}$/);
      for (const reference of [id, id.slice(0, 12), id.slice(0, 3), reserved]) {
        const response = await t.request('POST', '/run', { prompt: 'run: cat /run/berth/env/X', container: { secrets_env: { X: reference } } });
        assert.equal(response.status, 400, `${reference}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.status, 'error');
        assert.match(response.body.error, /secrets_env/);
      }
    } finally {
      await exec('podman', ['secret', 'rm', reserved]).catch(() => undefined);
    }
  });

  test('volume relabelling (z/Z) is refused without the operator switch, before any container', async () => {
    for (const option of ['z', 'Z']) {
      const response = await t.request('POST', '/run', { prompt: 'hi', container: { volumes: [`/tmp:/mnt/x:${option}`] } });
      assert.equal(response.status, 400, JSON.stringify(response.body));
      assert.match(response.body.error, /container\.volumes\[0\].*SERVICE_AGENT_ALLOW_RELABEL/);
    }
  });

  test('the offline model listens on loopback and wants its key, which only the gateway has; runs still reach it through the gateway', async () => {
    const upstream = new URL(t.berth.engineAccess.current().upstream.baseUrl);
    assert.equal(upstream.hostname, '127.0.0.1');
    const fromHost = await fetch(`http://127.0.0.1:${upstream.port}/v1/messages`, { method: 'POST', body: '{}' }).then(
      (response) => `answered ${response.status}`,
      (error: Error) => `refused: ${(error.cause as Error | undefined)?.message ?? error.message}`,
    );
    assert.equal(fromHost, 'answered 401');
    const run = await t.request('POST', '/run', { prompt: 'say: still reachable' });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.equal(run.body.output, 'still reachable');
  });
});
