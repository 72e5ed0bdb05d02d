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
