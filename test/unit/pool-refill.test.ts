// The pool's refill when the server has no free container slot: each missing engine is tried once, then
// again later (a start that ends at once must not make the refill loop start another, endlessly).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { EnginePool, type PoolDependencies } from '../../src/core/pool/engine-pool.js';

test('with no free slot, a refill tries each missing engine once and retries later', async () => {
  let attempts = 0;
  const deps = {
    kind: 'run',
    settings: { size: 3, maxAgeMs: 60_000, refillPauseMs: 500 },
    runtime: {},
    sessions: { removeUnused: async () => 0 },
    container: { engineAccess: { status: () => ({ mode: 'offline-model' }) } },
    slots: {
      takeReclaimable: () => {
        attempts++;
        return undefined;
      },
    },
    template: {},
    engineBinary: async () => '/opt/claude/claude',
    log: pino({ level: 'silent' }),
  } as unknown as PoolDependencies;
  const pool = new EnginePool(deps);
  await pool.start();
  assert.equal(attempts, 3);
  assert.deepEqual(pool.readyContainers(), []);
  await pool.close();
  assert.equal(attempts, 3, 'a closed pool does not try again');
});
