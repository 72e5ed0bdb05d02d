// The WorkspaceStore contract (src/store/workspaces/workspace-store.ts) as one suite any backend runs: pass a name
// and a function that opens a fresh, empty store. Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { WorkspaceRecord, WorkspaceStore } from '../../src/store/workspaces/workspace-store.js';

export const workspaceId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

export function workspaceRecord(n: number, extra: Partial<WorkspaceRecord> = {}): WorkspaceRecord {
  return {
    id: workspaceId(n),
    owner: 'caller-a',
    createdAt: `2030-01-01T00:00:0${n}.000Z`,
    lastUsedAt: `2030-01-01T00:00:0${n}.000Z`,
    source: 'empty',
    ownedBySession: null,
    uploadCheckpointAt: null,
    runCheckpointAt: null,
    sizeBytes: 0,
    fileCount: 0,
    ...extra,
  };
}

export function workspaceStoreContract(name: string, open: () => WorkspaceStore | Promise<WorkspaceStore>): void {
  const id = workspaceId;
  const record = workspaceRecord;
  describe(`WorkspaceStore contract: ${name}`, () => {
    let store: WorkspaceStore;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(() => store.close());

    it('numbers the saved copies of a workspace and records which node saved the last', async () => {
      await store.insert(record(1));
      await store.insert(record(2));
      assert.deepEqual(await store.copyOf(id(1)), { copy: 0, node: null });
      assert.equal(await store.recordCopy(id(1), 'node-a'), 1);
      assert.equal(await store.recordCopy(id(1), 'node-b'), 2);
      assert.deepEqual(await store.copyOf(id(1)), { copy: 2, node: 'node-b' });
      assert.deepEqual(await store.copyOf(id(2)), { copy: 0, node: null }, 'each workspace counts its own');
      assert.deepEqual((await Promise.all([1, 2, 3].map(() => store.recordCopy(id(2), 'node-c')))).sort(), [1, 2, 3]);
      assert.equal(await store.copyOf(id(9)), undefined);
      assert.equal(await store.recordCopy(id(9), 'node-a'), undefined);
      assert.deepEqual(await store.get(id(1)), record(1), 'the record itself is unchanged');
    });

    it('keeps a workspace as inserted and finds it by id', async () => {
      const ws = record(1, { source: 'git', uploadCheckpointAt: '2030-01-02T00:00:00.000Z' });
      await store.insert(ws);
      assert.deepEqual(await store.get(ws.id), ws);
      assert.equal(await store.get(id(9)), undefined);
    });

    it('keeps every field, sizes beyond 32 bits included', async () => {
      const ws = record(1, {
        source: 'session', ownedBySession: id(7), uploadCheckpointAt: '2030-01-02T03:04:05.678Z', runCheckpointAt: '2030-01-03T00:00:00.001Z',
        sizeBytes: 5 * 2 ** 40, fileCount: 123_456,
      });
      await store.insert(ws);
      assert.deepEqual(await store.get(ws.id), ws);
    });

    it('refuses a second workspace with the same id', async () => {
      await store.insert(record(1));
      await assert.rejects(store.insert(record(1, { owner: 'caller-b' })));
      assert.equal((await store.get(id(1)))?.owner, 'caller-a');
    });

    it('lists an owner\'s workspaces only, newest first', async () => {
      await store.insert(record(1));
      await store.insert(record(2));
      await store.insert(record(3, { owner: 'caller-b' }));
      assert.deepEqual((await store.listByOwner('caller-a')).map((ws) => ws.id), [id(2), id(1)]);
      assert.deepEqual((await store.listByOwner('caller-b')).map((ws) => ws.id), [id(3)]);
      assert.deepEqual(await store.listByOwner('nobody'), []);
    });

    it('counts toward the per-caller cap only the workspaces a caller made itself', async () => {
      await store.insert(record(1));
      await store.insert(record(2, { source: 'session', ownedBySession: id(7) }));
      await store.insert(record(3, { owner: 'caller-b' }));
      assert.equal(await store.countCallerOwned('caller-a'), 1);
      assert.equal(await store.countCallerOwned('nobody'), 0);
    });

    it('updates only the fields given', async () => {
      await store.insert(record(1));
      await store.update(id(1), { sizeBytes: 42, fileCount: 3 });
      await store.update(id(1), { lastUsedAt: '2030-02-01T00:00:00.000Z', sizeBytes: undefined });
      await store.update(id(1), {});
      const ws = await store.get(id(1));
      assert.equal(ws?.sizeBytes, 42);
      assert.equal(ws?.fileCount, 3);
      assert.equal(ws?.lastUsedAt, '2030-02-01T00:00:00.000Z');
      assert.equal(ws?.createdAt, record(1).createdAt);
    });

    it('updates checkpoints and the source', async () => {
      await store.insert(record(1));
      await store.update(id(1), { uploadCheckpointAt: '2030-03-01T00:00:00.000Z', runCheckpointAt: '2030-03-02T00:00:00.000Z', source: 'upload' });
      const ws = await store.get(id(1));
      assert.equal(ws?.uploadCheckpointAt, '2030-03-01T00:00:00.000Z');
      assert.equal(ws?.runCheckpointAt, '2030-03-02T00:00:00.000Z');
      assert.equal(ws?.source, 'upload');
    });

    it('finds the workspaces unused since a time, least recently used first', async () => {
      await store.insert(record(5));
      await store.insert(record(1));
      await store.insert(record(2));
      assert.deepEqual((await store.unusedSince('2030-01-01T00:00:03.000Z')).map((ws) => ws.id), [id(1), id(2)]);
      assert.deepEqual(await store.unusedSince('2030-01-01T00:00:01.000Z'), [], 'strictly before');
    });

    it('links sessions; a link is replaced, removed, and goes with its workspace', async () => {
      await store.insert(record(1));
      await store.insert(record(2));
      await store.link({ sessionId: 's-1', workspaceId: id(1), owned: false });
      await store.link({ sessionId: 's-2', workspaceId: id(1), owned: true });
      assert.deepEqual(await store.linkOf('s-2'), { sessionId: 's-2', workspaceId: id(1), owned: true });
      assert.deepEqual(await store.sessionsOf(id(1)), ['s-1', 's-2']);
      await store.link({ sessionId: 's-1', workspaceId: id(2), owned: false });
      assert.deepEqual(await store.sessionsOf(id(1)), ['s-2']);
      await store.unlink('s-2');
      assert.equal(await store.linkOf('s-2'), undefined);
      await store.delete(id(2));
      assert.equal(await store.linkOf('s-1'), undefined);
      assert.equal(await store.get(id(2)), undefined);
      assert.deepEqual(await store.ids(), [id(1)]);
    });

    it('orders session ids byte-wise, as SQLite does', async () => {
      await store.insert(record(1));
      for (const sessionId of ['b', 'B', 'a-2', 'a_1', 'A']) await store.link({ sessionId, workspaceId: id(1), owned: false });
      assert.deepEqual(await store.sessionsOf(id(1)), ['A', 'B', 'a-2', 'a_1', 'b']);
    });

    it('refuses a link to a workspace that does not exist', async () => {
      await assert.rejects(store.link({ sessionId: 's-1', workspaceId: id(9), owned: false }));
      assert.equal(await store.linkOf('s-1'), undefined);
    });

    it('lists every workspace id', async () => {
      await store.insert(record(1));
      await store.insert(record(2, { owner: 'caller-b' }));
      assert.deepEqual((await store.ids()).sort(), [id(1), id(2)]);
    });
  });
}
