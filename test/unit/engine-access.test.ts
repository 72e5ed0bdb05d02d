// Which model the gateway forwards to, and with which credential: the credential is Berth's alone (no Podman
// secret is created for containers any more), read from the file, from the operator's Podman secret, or the
// offline model's generated key, with the offline model started on loopback.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Config } from '../../src/config.js';
import type { Secrets } from '../../src/runtime/ports/secrets.js';
import { EngineAccess, OFFLINE_MODEL_HOST } from '../../src/core/engine-access.js';
import { BerthError } from '../../src/errors.js';

let dataDir: string;
before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'berth-engine-access-'));
});
after(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

function configWith(engine: Partial<Config['engine']>): Config {
  return { dataDir, engine: { credentialsSecret: 'berth-engine-credentials', offlineModel: false, credentialKind: 'api_key', baseUrl: undefined, ...engine } } as unknown as Config;
}

/** A runtime with these secrets; it fails the test if asked to create or remove one. */
function runtimeWith(secrets: Record<string, string>): Pick<Secrets, 'secretExists' | 'readSecret'> & Partial<Secrets> {
  return {
    secretExists: async (name) => name in secrets,
    readSecret: async (name) => {
      if (!(name in secrets)) throw new Error(`no secret ${name}`);
      return secrets[name]!;
    },
    createSecret: async () => assert.fail('no secret is created for containers'),
    removeSecret: async () => assert.fail('no secret is removed'),
  };
}

const noOfflineModel = async () => assert.fail('the offline model is not started');

test('a credentials file: its content, forwarded to SERVICE_ENGINE_BASE_URL as the configured kind', async () => {
  const file = join(dataDir, 'credentials');
  await writeFile(file, '  sk-ant-oat-secret-value\n');
  const access = new EngineAccess(configWith({ credentialsFile: file, credentialKind: 'oauth_token', baseUrl: 'https://models.example' }), runtimeWith({}), noOfflineModel);
  const state = await access.init();
  assert.equal(state.mode, 'credentials-file');
  assert.deepEqual(access.current().upstream, { baseUrl: 'https://models.example', credential: { kind: 'oauth_token', value: 'sk-ant-oat-secret-value' } });
  assert.equal(access.current().offline, false);
  assert.ok(!state.message.includes('sk-ant'), 'the message never shows the credential');
});

test('an empty credentials file stops the start, naming the variable', async () => {
  const file = join(dataDir, 'empty');
  await writeFile(file, '\n');
  await assert.rejects(new EngineAccess(configWith({ credentialsFile: file }), runtimeWith({}), noOfflineModel).init(), /SERVICE_ENGINE_CREDENTIALS_FILE/);
});

test('the operator\'s Podman secret: read once, forwarded to Anthropic\'s API by default', async () => {
  const access = new EngineAccess(configWith({}), runtimeWith({ 'berth-engine-credentials': 'sk-ant-api-key\n' }), noOfflineModel);
  assert.equal((await access.init()).mode, 'credentials-secret');
  assert.deepEqual(access.current().upstream, { baseUrl: 'https://api.anthropic.com', credential: { kind: 'api_key', value: 'sk-ant-api-key' } });
});

test('the offline model: started on loopback with a generated key, which is the upstream\'s credential; no key file kept', async () => {
  await writeFile(join(dataDir, 'offline-model.key'), 'offline-left-by-an-older-version');
  const started: { host: string; apiKey: string }[] = [];
  let closed = false;
  const access = new EngineAccess(configWith({ offlineModel: true }), runtimeWith({}), async (options) => {
    started.push(options);
    return { port: 41234, close: async () => void (closed = true) };
  });
  const state = await access.init();
  assert.equal(state.mode, 'offline-model');
  assert.equal(started.length, 1);
  assert.equal(started[0]!.host, OFFLINE_MODEL_HOST);
  assert.equal(OFFLINE_MODEL_HOST, '127.0.0.1');
  assert.match(started[0]!.apiKey, /^offline-[0-9a-f]{48}$/);
  assert.deepEqual(access.current().upstream, { baseUrl: 'http://127.0.0.1:41234', credential: { kind: 'api_key', value: started[0]!.apiKey } });
  assert.equal(access.current().offline, true);
  await assert.rejects(import('node:fs/promises').then((fs) => fs.readFile(join(dataDir, 'offline-model.key'))), /ENOENT/);
  await access.close();
  assert.ok(closed);
});

test('nothing configured: runs are refused with 503', async () => {
  const access = new EngineAccess(configWith({}), runtimeWith({}), noOfflineModel);
  assert.equal((await access.init()).mode, 'not-configured');
  assert.throws(() => access.current(), (error: unknown) => error instanceof BerthError && error.status === 503);
});
