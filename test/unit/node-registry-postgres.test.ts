// The node registry (core/cluster/node-registry.ts) over the nodes table on a real, throw-away PostgreSQL 15
// (test/support/postgres.ts), as two nodes sharing a database use it: a node registers with a lease that its
// heartbeats renew; a second process under a live name is refused; a released name is free at once; a node
// whose heartbeats stop is found by expiredNodes() once its lease lapses, and its name can then be taken over,
// after which the old process can neither renew nor release it. Each test has a database of its own.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { NodeNameTakenError, NodeRegistry } from '../../src/core/cluster/node-registry.js';
import { PostgresDatabase } from '../../src/store/postgres/database.js';
import { PostgresNodeStore } from '../../src/store/nodes/postgres-node-store.js';
import { startPostgres, type TestPostgres } from '../support/postgres.js';

let server: TestPostgres;
const opened: PostgresDatabase[] = [];

before(async () => {
  server = await startPostgres();
});

after(async () => {
  await Promise.all(opened.map((database) => database.close()));
  await server.stop();
  assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
});

/** Two nodes' stores (two pools) on one fresh database. */
async function twoNodes(): Promise<[PostgresNodeStore, PostgresNodeStore]> {
  const address = await server.createDatabase('nodes');
  const a = new PostgresDatabase({ connection: address.config });
  const b = new PostgresDatabase({ connection: address.url });
  opened.push(a, b);
  return Promise.all([PostgresNodeStore.open(a), PostgresNodeStore.open(b)]);
}

/** A node's identity; each call another data directory unless `dataId` says which. */
const identity = (name: string, dataId: string = randomUUID()) => ({ name, dataId, url: `http://${name}.internal:8080`, version: '9.9.9' });
const errors: Error[] = [];
const options = (leaseMs: number) => ({ leaseMs, onHeartbeatError: (error: Error) => errors.push(error) });

describe('node registry on PostgreSQL', () => {
  it('registers with a lease that heartbeats renew, shows every node, and releases at deregister', async () => {
    const [storeA, storeB] = await twoNodes();
    const a = await NodeRegistry.register(storeA, identity('node-a'), options(1_500));
    const b = await NodeRegistry.register(storeB, identity('node-b'), options(1_500));
    const [rowA] = (await b.nodes()).filter((node) => node.name === 'node-a');
    assert.equal(rowA?.url, 'http://node-a.internal:8080');
    assert.equal(rowA?.version, '9.9.9');
    assert.equal(rowA?.releasedAt, null);
    const leaseMs = Date.parse(rowA!.expiresAt) - Date.parse(rowA!.heartbeatAt);
    assert.equal(leaseMs, 1_500, 'expires_at = heartbeat + lease');
    assert.ok(a.leaseSecondsLeft() > 1 && a.leaseSecondsLeft() <= 1.5, `lease left ${a.leaseSecondsLeft()}`);

    // Three leases long: without heartbeats (every 500 ms) the lease would have lapsed twice over.
    await sleep(4_500);
    assert.deepEqual(await a.expiredNodes(), [], 'heartbeats keep both leases live');
    const later = (await a.nodes()).find((node) => node.name === 'node-a')!;
    assert.ok(Date.parse(later.heartbeatAt) > Date.parse(rowA!.heartbeatAt) + 3_000, 'the heartbeat moved on');
    assert.equal(later.startedAt, rowA!.startedAt);
    assert.ok(a.leaseSecondsLeft() > 0.5, `lease left ${a.leaseSecondsLeft()}`);

    await a.deregister();
    await b.deregister();
    await a.deregister(); // twice is fine
    const released = await storeA.list();
    assert.deepEqual(released.map((node) => node.name), ['node-a', 'node-b']);
    for (const node of released) {
      assert.notEqual(node.releasedAt, null, `${node.name} released`);
      assert.ok(Date.parse(node.expiresAt) <= Date.parse(node.releasedAt!), `${node.name}'s lease ends at its release`);
    }
    assert.deepEqual(await storeA.expired(), [], 'a released node is not lost');
    assert.equal(a.leaseSecondsLeft(), 0);
    assert.deepEqual(errors, []);
  });

  it('refuses a second process under a live name, and frees the name at once when released', async () => {
    const [storeA, storeB] = await twoNodes();
    const first = await NodeRegistry.register(storeA, identity('same'), options(15_000));
    await assert.rejects(
      NodeRegistry.register(storeB, { ...identity('same'), url: 'http://other:8080' }, options(15_000)),
      (error: unknown) => error instanceof NodeNameTakenError && /node name "same" is held by another live node, on another data directory \(http:\/\/same\.internal:8080/.test(error.message) && /SERVICE_NODE_NAME/.test(error.message),
    );
    assert.equal((await storeA.list())[0]?.url, 'http://same.internal:8080', 'the refused node changed nothing');
    await first.deregister();
    const second = await NodeRegistry.register(storeB, { ...identity('same'), url: 'http://other:8080' }, options(15_000));
    assert.equal((await storeA.list())[0]?.url, 'http://other:8080');
    assert.equal((await storeA.list())[0]?.releasedAt, null);
    // The first process's release comes late (after the second took the name): it must not free the second's lease.
    assert.equal(await storeA.release('same', 'some-other-holder'), false);
    await second.deregister();
  });

  it('a restart on the same data directory takes its live name back at once; the process before then finds its lease gone', async () => {
    const [storeA, storeB] = await twoNodes();
    const dataId = randomUUID();
    const before = await NodeRegistry.register(storeA, identity('restarted', dataId), options(15_000));
    // kill -9 and a start again within the lease: the same data directory, a new process.
    const after = await NodeRegistry.register(storeB, { ...identity('restarted', dataId), url: 'http://restarted.internal:9090' }, options(15_000));
    const [row] = await storeA.list();
    assert.equal(row?.url, 'http://restarted.internal:9090');
    assert.equal(row?.releasedAt, null);
    errors.length = 0;
    await (before as unknown as { heartbeat(): Promise<void> }).heartbeat();
    assert.equal(before.registered, false, 'the process before, were it still running, no longer holds the name');
    assert.match(errors[0]?.message ?? '', /lost its lease/);
    await before.deregister();
    assert.equal((await storeA.list())[0]?.releasedAt, null, 'its late release left the restarted process\'s lease alone');
    await assert.rejects(NodeRegistry.register(storeA, identity('restarted'), options(15_000)), NodeNameTakenError, 'another data directory is still refused');
    await after.deregister();
    errors.length = 0;
  });

  it('of processes claiming one name at once, exactly one gets it', async () => {
    const [storeA, storeB] = await twoNodes();
    const claims = await Promise.allSettled(
      Array.from({ length: 8 }, (_, index) => NodeRegistry.register(index % 2 === 0 ? storeA : storeB, identity('race'), options(15_000))),
    );
    const won = claims.filter((claim): claim is PromiseFulfilledResult<NodeRegistry> => claim.status === 'fulfilled');
    assert.equal(won.length, 1);
    assert.ok(claims.every((claim) => claim.status === 'fulfilled' || claim.reason instanceof NodeNameTakenError));
    await won[0]!.value.deregister();
  });

  it('finds a node whose heartbeats stopped once its lease lapsed; its name can be taken over and the old process cannot renew it', async () => {
    const [storeA, storeB] = await twoNodes();
    const lost = await NodeRegistry.register(storeA, identity('lost'), options(600));
    const alive = await NodeRegistry.register(storeB, identity('alive'), options(600));
    // The lost node's process stalls: its heartbeats stop (as after kill -9, or a frozen host), without a release.
    (lost as unknown as { timer: NodeJS.Timeout }).timer.close();
    assert.deepEqual(await alive.expiredNodes(), [], 'not before its lease lapses');
    await sleep(1_200);
    const expired = await alive.expiredNodes();
    assert.deepEqual(expired.map((node) => node.name), ['lost'], 'only the stalled node, not the one still beating');
    assert.equal(expired[0]!.url, 'http://lost.internal:8080');
    assert.equal(expired[0]!.releasedAt, null);

    const successor = await NodeRegistry.register(storeB, identity('lost'), options(15_000));
    assert.deepEqual(await alive.expiredNodes(), [], 'taken over: no longer lost');
    // The stalled process wakes: its heartbeat finds the name taken and it counts itself unregistered.
    errors.length = 0;
    await (lost as unknown as { heartbeat(): Promise<void> }).heartbeat();
    assert.equal(lost.registered, false);
    assert.match(errors[0]?.message ?? '', /lost its lease/);
    await lost.deregister();
    assert.equal((await storeA.list()).find((node) => node.name === 'lost')?.releasedAt, null, 'its deregister left the successor\'s lease alone');
    await successor.deregister();
    await alive.deregister();
  });
});
