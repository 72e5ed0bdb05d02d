// GET /secrets answers SystemStatus.secretNames: the store's secrets minus those Berth keeps for itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Config } from '../../src/config.js';
import type { EngineAccess } from '../../src/core/engine-access.js';
import { SystemStatus } from '../../src/core/system-status.js';

function statusOver(secrets: string[], credentialsSecret: string): SystemStatus {
  const config = { engine: { credentialsSecret } } as unknown as Config;
  // The service's health (ping, secretExists) is not what these tests ask about.
  const runtime = { listSecrets: async () => secrets, ping: () => assert.fail('not asked'), secretExists: () => assert.fail('not asked') };
  return new SystemStatus(config, runtime, {} as EngineAccess);
}

test('lists the secrets a caller may name in secrets_env, in the store\'s order', async () => {
  const status = statusOver(['gh-token', 'npm-token'], 'berth-engine-credentials');
  assert.deepEqual(await status.secretNames(), ['gh-token', 'npm-token']);
});

test('leaves out the offline model\'s key, the engine credential and every other berth- secret', async () => {
  const status = statusOver(
    ['berth-engine-credentials', 'berth-offline-model-key-berth-1a2b-3c4d', 'Berth-Other', 'gh-token', 'team-claude-key'],
    'team-claude-key',
  );
  assert.deepEqual(await status.secretNames(), ['gh-token']);
});

test('leaves out names no request could use', async () => {
  assert.deepEqual(await statusOver(['.hidden', '-dash', 'ok_1'], 'berth-engine-credentials').secretNames(), ['ok_1']);
});

/** A status whose runtime and engine access are fine, for the node's part of GET /health. */
function healthyStatus(node?: ConstructorParameters<typeof SystemStatus>[3]): SystemStatus {
  const config = { version: '1.2.3-alpha', engine: { credentialsSecret: 'berth-engine-credentials' } } as unknown as Config;
  const runtime = { listSecrets: async () => [], ping: async () => undefined, secretExists: async () => true };
  const engineAccess = { status: () => ({ mode: 'offline', message: 'offline model' }) } as unknown as EngineAccess;
  return new SystemStatus(config, runtime as never, engineAccess, node);
}

test('GET /health names the node; with a shared database its lease is a component, and a lost lease degrades the health', async () => {
  const single = await healthyStatus({ name: 'host-default', lease: undefined }).health();
  assert.equal(single.node, 'host-default');
  assert.equal(single.status, 'ok', JSON.stringify(single));
  assert.equal(single.components.some((c) => c.name === 'node-lease'), false, 'no lease without a database');
  const lease = { registered: true };
  const clustered = healthyStatus({ name: 'node-1', lease });
  let health = await clustered.health();
  assert.equal(health.status, single.status);
  assert.deepEqual(health.components.at(-1), { name: 'node-lease', status: 'ok' });
  lease.registered = false;
  health = await clustered.health();
  assert.equal(health.status, 'degraded');
  assert.deepEqual(health.components.at(-1), { name: 'node-lease', status: 'unavailable' });
});
