// The pool's refill when the server has no free container slot: each missing engine is tried once, then
// again later (a start that ends at once must not make the refill loop start another, endlessly). And the
// refill after claims: only once claims pause and the host's CPUs were idle at least half that pause, or
// after ten busy pauses without a claim.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import pino from 'pino';
import { EnginePool, type PoolDependencies } from '../../src/core/pool/engine-pool.js';
import type { RunPlan } from '../../src/core/run-plan.js';

/** A plan the pool serves (its own template): a claim finds no ready engine and tries to start one. */
const plan = {
  session: { kind: 'new' },
  workdir: '/workspace',
  prompt: 'say: hi',
  engine: {},
  container: { image: 'agent', volumes: [], secretsEnv: [], memoryBytes: 1, cpus: 1, cpuShares: 1024 },
} as unknown as RunPlan;

/** A pool on a server with no free slot: every engine start ends at once, counted in `attempts()`. */
function poolWithoutSlots(options: { readonly size: number; readonly pauseMs: number; readonly busy: () => number }) {
  let attempts = 0;
  const deps = {
    kind: 'run',
    settings: { size: options.size, maxAgeMs: 60_000, refillPauseMs: options.pauseMs },
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
    cpu: { read: () => ({ busyMs: 0, totalMs: 0 }), busySince: options.busy },
    log: pino({ level: 'silent' }),
  } as unknown as PoolDependencies;
  return { pool: new EnginePool(deps), attempts: () => attempts };
}

async function until(what: string, check: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await delay(10);
  }
}

test('with no free slot, a refill tries each missing engine once and retries later', async () => {
  const { pool, attempts } = poolWithoutSlots({ size: 3, pauseMs: 500, busy: () => 0 });
  await pool.start();
  assert.equal(attempts(), 3);
  assert.deepEqual(pool.readyContainers(), []);
  await pool.close();
  assert.equal(attempts(), 3, 'a closed pool does not try again');
});

test('after a claim, the pool refills once claims pause, and only when the host was not busy meanwhile', async () => {
  let busy = 0.9;
  const { pool, attempts } = poolWithoutSlots({ size: 2, pauseMs: 40, busy: () => busy });
  try {
    assert.equal(await pool.claim(plan, 'caller'), undefined);
    assert.equal(attempts(), 1, 'the run tried to start an engine for itself');
    await delay(150);
    assert.equal(attempts(), 1, 'no refill while the host was busy');
    busy = 0.2;
    await until('the refill of both engines', () => attempts() === 3);
  } finally {
    await pool.close();
  }
});

test('a host kept busy without claims postpones the refill ten pauses at most', async () => {
  const { pool, attempts } = poolWithoutSlots({ size: 1, pauseMs: 20, busy: () => 0.95 });
  try {
    await pool.claim(plan, 'caller');
    assert.equal(attempts(), 1);
    await delay(120);
    assert.equal(attempts(), 1, 'postponed while busy (eleven pauses take 220 ms at least)');
    await until('the refill after ten busy pauses', () => attempts() === 2);
  } finally {
    await pool.close();
  }
});
