// The engine credential, a Podman secret, never reaches a container: Berth reads it at start and its model
// gateway puts it on the engine's requests (docs/egress.md). The engine holds a per-run credential; neither
// the API response nor `podman inspect` of the running container shows the real one.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { modelUrlFromHost, startTestBerth, type TestBerth } from '../support/berth.js';

const run = promisify(execFile);
const secretValue = `sk-berth-test-${randomBytes(12).toString('hex')}`;
// Named outside the berth- namespace: it is reserved because it is the configured engine credential.
const secretName = `test-engine-credential-${randomBytes(4).toString('hex')}`;
/** A secret of the caller's own (not reserved), that GET /secrets lists. */
const callerSecret = `test-caller-token-${randomBytes(4).toString('hex')}`;
let model: OfflineModel;
let t: TestBerth;

before(async () => {
  // On loopback: only Berth's gateway, on the host, reaches it.
  model = await startOfflineModel({ host: '127.0.0.1', port: 0, apiKey: secretValue });
  await run('sh', ['-c', `printf '%s' "$VALUE" | podman secret create ${secretName} -`], { env: { ...process.env, VALUE: secretValue } });
  await run('sh', ['-c', `printf '%s' "$VALUE" | podman secret create ${callerSecret} -`], { env: { ...process.env, VALUE: secretValue } });
  t = await startTestBerth({
    SERVICE_OFFLINE_MODEL: 'false',
    SERVICE_ENGINE_CREDENTIALS_SECRET: secretName,
    SERVICE_ENGINE_BASE_URL: modelUrlFromHost(model.port),
  });
});

after(async () => {
  await t?.stop();
  await model?.close();
  await run('podman', ['secret', 'rm', secretName]).catch(() => undefined);
  await run('podman', ['secret', 'rm', callerSecret]).catch(() => undefined);
});

test('/claude/status and /health report the configured secret', async () => {
  const status = await t.request('GET', '/claude/status');
  assert.equal(status.body.configured, true);
  assert.match(status.body.message, new RegExp(secretName));
  const health = await t.request('GET', '/health');
  assert.equal(health.body.components.find((c: { name: string }) => c.name === 'engine-credentials-secret').status, 'ok');
});

test('the engine authenticates through the gateway with a per-run credential; the secret appears in no container, response or inspect output', async () => {
  const pending = t.request('POST', '/run', { prompt: 'run: sleep 4; echo "key=$ANTHROPIC_API_KEY"' });
  let inspected = '';
  for (let attempt = 0; attempt < 80 && inspected === ''; attempt++) {
    await new Promise((r) => setTimeout(r, 100));
    const names = await t.leftovers();
    if (names.length === 0) continue;
    const { stdout } = await run('podman', ['inspect', names[0]!]).catch(() => ({ stdout: '' }));
    if (stdout.includes('"Running": true')) inspected = stdout;
  }
  const response = await pending;
  assert.ok(inspected !== '', 'the running container was inspected');
  assert.ok(!inspected.includes(secretValue), 'podman inspect must not contain the secret value');
  assert.equal(response.status, 200, JSON.stringify(response.body));
  // The model (which accepts only the secret's value) answered: the gateway put the real credential in.
  assert.match(response.body.output, /^key=brt_[0-9a-f]{64}$/);
  assert.ok(!JSON.stringify(response.body).includes(secretValue));
  assert.deepEqual(await t.leftovers(), []);
});

test('GET /secrets lists names, never values', async () => {
  const response = await t.request('GET', '/secrets');
  assert.equal(response.status, 200);
  assert.ok(response.body.secrets.includes(callerSecret));
  assert.ok(!JSON.stringify(response.body).includes(secretValue));
});

async function storedSecrets(): Promise<string[]> {
  const { stdout } = await run('podman', ['secret', 'ls', '--format', '{{.Name}}']);
  return stdout.split('\n').filter((name) => name !== '');
}

test('GET /secrets leaves out the engine credential secret, whatever its name, and every berth- secret', async () => {
  assert.ok((await storedSecrets()).includes(secretName));
  const listed: string[] = (await t.request('GET', '/secrets')).body.secrets;
  assert.ok(listed.includes(callerSecret));
  assert.ok(!listed.includes(secretName), 'the engine credential is not listed');
  assert.deepEqual(listed.filter((name) => name.toLowerCase().startsWith('berth-')), []);
  const refused = await t.request('POST', '/run', { prompt: 'say: x', container: { secrets_env: { KEY: secretName } } });
  assert.equal(refused.status, 400, 'a run may not use it either');
});

test('the offline model\'s key is no Podman secret (only the gateway holds it); caller secrets stay usable', async () => {
  const offline = await startTestBerth();
  try {
    const key = (await storedSecrets()).find((name) => name.startsWith(`berth-offline-model-key-${offline.config.instanceName}`));
    assert.equal(key, undefined, 'no secret for the offline model\'s key');
    const listed: string[] = (await offline.request('GET', '/secrets')).body.secrets;
    assert.ok(listed.includes(callerSecret));
    const used = await offline.request('POST', '/run', { prompt: 'say: usable', container: { secrets_env: { KEY: callerSecret } } });
    assert.equal(used.status, 200, `a listed secret is one a run may use: ${JSON.stringify(used.body)}`);
  } finally {
    await offline.stop();
  }
});
