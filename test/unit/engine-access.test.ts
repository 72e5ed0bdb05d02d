// Where engine containers reach the offline model: the agent network's gateway address (no name to look up
// in the container) when Podman is rootful and the network has one, else host.containers.internal.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Config } from '../../src/config.js';
import type { ContainerRuntime } from '../../src/runtime/container-runtime.js';
import { EngineAccess, HOST_FROM_CONTAINER, offlineModelHost } from '../../src/core/engine-access.js';

test('rootful with a gateway: the gateway address itself', () => {
  assert.equal(offlineModelHost(true, '10.88.0.1'), '10.88.0.1');
});

test('rootless, or a network without a gateway: the name Podman writes into /etc/hosts', () => {
  assert.equal(offlineModelHost(false, '10.88.0.1'), HOST_FROM_CONTAINER);
  assert.equal(offlineModelHost(true, undefined), HOST_FROM_CONTAINER);
});

test('the offline model mode hands runs a base URL on that host and the model\'s port', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-engine-access-'));
  try {
    const config = { dataDir, engine: { credentialsSecret: 'berth-engine-credentials', offlineModel: true, credentialKind: 'api_key' } } as unknown as Config;
    const secrets = new Set<string>();
    const runtime = {
      secretExists: async (name: string) => secrets.has(name),
      listSecrets: async () => [...secrets],
      createSecret: async (name: string) => void secrets.add(name),
      removeSecret: async (name: string) => void secrets.delete(name),
    } as unknown as ContainerRuntime;
    const access = new EngineAccess(config, runtime, async () => ({ port: 41234, close: async () => undefined }), 'unit', '10.88.0.1');
    const state = await access.init();
    assert.equal(state.mode, 'offline-model');
    assert.equal(state.baseUrl, 'http://10.88.0.1:41234');
    await access.close();
    assert.deepEqual([...secrets], [], 'the key secret is removed again');
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});
