// The WorkspaceStore contract, as one suite every backend runs (SQLite now; PostgreSQL with issue 26).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import type { WorkspaceRecord, WorkspaceStore } from '../../src/store/workspaces/workspace-store.js';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-workspace-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

const backends: { name: string; open: () => WorkspaceStore }[] = [
  { name: 'sqlite file', open: () => new SqliteWorkspaceStore(join(dir, `ws-${(counter += 1)}.db`)) },
  { name: 'sqlite in memory', open: () => new SqliteWorkspaceStore(':memory:') },
];

const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function record(n: number, extra: Partial<WorkspaceRecord> = {}): WorkspaceRecord {
  return {
    id: id(n),
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

for (const backend of backends) {
  describe(`WorkspaceStore contract: ${backend.name}`, () => {
    let store: WorkspaceStore;
    beforeEach(() => {
      store = backend.open();
    });
    afterEach(() => store.close());

    it('keeps a workspace as inserted and finds it by id', async () => {
      const ws = record(1, { source: 'git', uploadCheckpointAt: '2030-01-02T00:00:00.000Z' });
      await store.insert(ws);
      assert.deepEqual(await store.get(ws.id), ws);
      assert.equal(await store.get(id(9)), undefined);
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
    });

    it('updates only the fields given', async () => {
      await store.insert(record(1));
      await store.update(id(1), { sizeBytes: 42, fileCount: 3 });
      await store.update(id(1), { lastUsedAt: '2030-02-01T00:00:00.000Z', sizeBytes: undefined });
      const ws = await store.get(id(1));
      assert.equal(ws?.sizeBytes, 42);
      assert.equal(ws?.fileCount, 3);
      assert.equal(ws?.lastUsedAt, '2030-02-01T00:00:00.000Z');
      assert.equal(ws?.createdAt, record(1).createdAt);
    });

    it('finds the workspaces unused since a time', async () => {
      await store.insert(record(1));
      await store.insert(record(5));
      assert.deepEqual((await store.unusedSince('2030-01-01T00:00:03.000Z')).map((ws) => ws.id), [id(1)]);
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
  });
}

it('a SQLite file keeps workspaces and links across a reopen', async () => {
  const path = join(dir, 'reopen.db');
  const first = new SqliteWorkspaceStore(path);
  await first.insert(record(1));
  await first.link({ sessionId: 's-1', workspaceId: id(1), owned: true });
  first.close();
  const second = new SqliteWorkspaceStore(path);
  assert.equal((await second.get(id(1)))?.id, id(1));
  assert.deepEqual(await second.linkOf('s-1'), { sessionId: 's-1', workspaceId: id(1), owned: true });
  second.close();
});
