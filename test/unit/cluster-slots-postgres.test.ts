// Per-caller limits counted across the cluster (issue 26) on a real, throw-away PostgreSQL 15: the slot store
// of two nodes, each on its own pool of one database, and the in-process counters over it. Many acquisitions
// at once for one caller from both nodes: exactly the limit are granted (the per-caller advisory lock makes the
// count exact; without it, statements counting at the same time all see room). Places of a node whose lease
// lapsed stop counting; a start clears only its own node's; the refusal is the single node's 429.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { ClusterSlots } from '../../src/core/cluster/slots.js';
import { ContainerSlots } from '../../src/core/containers/container-slots.js';
import { PostgresNodeStore } from '../../src/store/nodes/postgres-node-store.js';
import { PostgresDatabase } from '../../src/store/postgres/database.js';
import { PostgresSlotStore } from '../../src/store/slots/postgres-slot-store.js';
import { startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';

const log = pino({ level: 'silent' });

describe('container places counted across nodes on PostgreSQL', () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  const pools: PostgresDatabase[] = [];
  let a: PostgresSlotStore;
  let b: PostgresSlotStore;

  const pool = () => {
    const database = new PostgresDatabase({ connection: address.config, maxConnections: 12 });
    pools.push(database);
    return database;
  };

  async function register(database: PostgresDatabase, name: string, leaseMs: number): Promise<void> {
    const nodes = await PostgresNodeStore.open(database);
    const claim = await nodes.claim({ name, dataId: randomUUID(), url: `http://${name}.invalid`, version: 'test' }, randomUUID(), leaseMs);
    assert.equal(claim.claimed, true);
  }

  before(async () => {
    server = await startPostgres();
    address = await server.createDatabase('slots');
    const [poolA, poolB] = [pool(), pool()];
    await register(poolA, 'node-a', 60_000);
    await register(poolB, 'node-b', 60_000);
    [a, b] = await Promise.all([PostgresSlotStore.open(poolA, 'node-a'), PostgresSlotStore.open(poolB, 'node-b')]);
  });

  after(async () => {
    await Promise.all(pools.map((database) => database.close()));
    await server.stop();
    assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
  });

  test('24 acquisitions at once for one caller, half on each node, limit 5: exactly 5 granted; another caller is not held by them', async () => {
    const caller = `alice-${randomUUID()}`;
    const results = await Promise.all(Array.from({ length: 24 }, (_, index) => (index % 2 === 0 ? a : b).acquire('container', caller, randomUUID(), 5)));
    assert.equal(results.filter(Boolean).length, 5, JSON.stringify(results));
    assert.equal(await a.acquire('container', `bob-${randomUUID()}`, randomUUID(), 5), true);
    // Stacks are counted apart from containers.
    assert.equal(await b.acquire('stack', caller, randomUUID(), 1), true);
  });

  test('a place given back is free at once, on either node', async () => {
    const caller = `carol-${randomUUID()}`;
    const first = randomUUID();
    assert.equal(await a.acquire('container', caller, first, 1), true);
    assert.equal(await b.acquire('container', caller, randomUUID(), 1), false);
    await a.release(first);
    assert.equal(await b.acquire('container', caller, randomUUID(), 1), true);
  });

  test('the places of a node whose lease lapsed stop counting; a start clears only its own node\'s', async () => {
    const database = pool();
    await register(database, 'node-c', 600);
    const c = await PostgresSlotStore.open(database, 'node-c');
    const caller = `dave-${randomUUID()}`;
    assert.equal(await c.acquire('container', caller, randomUUID(), 2), true);
    assert.equal(await c.acquire('container', caller, randomUUID(), 2), true);
    assert.equal(await a.acquire('container', caller, randomUUID(), 2), false, 'node C is live: its two places count');
    await new Promise((resolve) => setTimeout(resolve, 900));
    assert.equal(await a.acquire('container', caller, randomUUID(), 2), true, 'node C\'s lease lapsed: its places no longer count');
    assert.equal(await c.clearNode(), 2);
    const [row] = await database.query<{ n: number }>('SELECT count(*)::int AS n FROM container_slots WHERE caller = $1', [caller]);
    assert.equal(row!.n, 1, 'node A\'s place stays');
  });

  test('the in-process counter over the cluster: the caller\'s limit on all nodes together, the same 429 as one node; answered() gives the place back', async () => {
    const caller = `erin-${randomUUID()}`;
    const onA = new ContainerSlots({ total: 10, perCaller: 2 }, new ClusterSlots(a, log));
    const onB = new ContainerSlots({ total: 10, perCaller: 2 }, new ClusterSlots(b, log));
    const first = await onA.acquire(caller);
    await onB.acquire(caller);
    await assert.rejects(onA.acquire(caller), (error: Error & { status?: number }) =>
      error.message === 'too many containers: this caller already has 2 runs, streams or agents running (SERVICE_MAX_CONTAINERS_PER_CALLER); retry when one has ended, or delete an agent');
    assert.equal(onA.inUse, 1, 'the refused place was given back here too');
    first.answered();
    await onA.acquire(caller);
  });

  test('a pending job waits for a place held on another node, and gets it once given back', async () => {
    const caller = `frank-${randomUUID()}`;
    const onA = new ContainerSlots({ total: 10, perCaller: 1 }, new ClusterSlots(a, log));
    const onB = new ContainerSlots({ total: 10, perCaller: 1 }, new ClusterSlots(b, log));
    const held = await onB.acquire(caller);
    let granted = false;
    const waiting = onA.waitCounted(caller, new AbortController().signal).then((slot) => {
      granted = true;
      return slot;
    });
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.equal(granted, false);
    held.release();
    (await waiting).release();
    assert.equal(granted, true);
  });
});
