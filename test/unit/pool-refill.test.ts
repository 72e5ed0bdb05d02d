// The pool's refill when the server has no free container slot: each missing engine is tried once, then
// again later (a start that ends at once must not make the refill loop start another, endlessly). And the
// refill after claims: only once claims pause and the host's CPUs were idle at least half that pause.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { setTimeout as delay } from 'node:timers/promises';
import { EnginePool, type PoolDependencies } from '../../src/core/pool/engine-pool.js';
import type { RunPlan } from '../../src/core/run-plan.js';

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
    cpu: { read: () => ({ busyMs: 0, totalMs: 0 }), busySince: () => 0 },
    log: pino({ level: 'silent' }),
  } as unknown as PoolDependencies;
  const pool = new EnginePool(deps);
  await pool.start();
  assert.equal(attempts, 3);
  assert.deepEqual(pool.readyContainers(), []);
  await pool.close();
  assert.equal(attempts, 3, 'a closed pool does not try again');
});

test('after a claim, the pool refills once claims pause, and only when the host was not busy meanwhile', async () => {
  let attempts = 0;
  let busy = 0.9;
  // A plan the pool serves: the claim finds no ready engine and tries to start one for itself.
  const plan = {
    session: { kind: 'new' },
    workdir: '/workspace',
    prompt: 'say: hi',
    engine: {},
    container: { image: 'agent', volumes: [], secretsEnv: [], memoryBytes: 1, cpus: 1, cpuShares: 1024 },
  };
  const deps = {
    kind: 'run',
    settings: { size: 2, maxAgeMs: 60_000, refillPauseMs: 40 },
    runtime: {},
    sessions: { removeUnused: async () => 0 },
    container: { engineAccess: { status: () => ({ mode: 'offline-model' }) } },
    slots: {
      takeReclaimable: () => {
        attempts++;
        return undefined;
      },
    },
    template: plan,
    engineBinary: async () => '/opt/claude/claude',
    cpu: { read: () => ({ busyMs: 0, totalMs: 0 }), busySince: () => busy },
    log: pino({ level: 'silent' }),
  } as unknown as PoolDependencies;
  const pool = new EnginePool(deps);
  try {
    const claimed = await pool.claim(plan as unknown as RunPlan, 'caller');
    assert.equal(claimed, undefined);
    assert.equal(attempts, 1, 'the run tried to start an engine for itself');
    await delay(150);
    assert.equal(attempts, 1, 'no refill while the host was busy');
    busy = 0.2;
    await delay(100);
    assert.equal(attempts, 3, 'refilled both engines once the host was quieter');
  } finally {
    await pool.close();
  }
});
