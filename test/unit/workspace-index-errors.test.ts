// The workspace index on a full disk: the service answers 503 BERTH_ERR_STORAGE_FULL (retry once space is
// freed), as the job store does, instead of a 500 (a run creating its session's own workspace met that 500).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { translatingFullDisk } from '../../src/core/workspaces/index-errors.js';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';
import type { WorkspaceRecord } from '../../src/store/workspaces/workspace-store.js';

const record: WorkspaceRecord = {
  id: '00000000-0000-4000-8000-000000000001', owner: 'alice', createdAt: '2030-01-01T00:00:00Z', lastUsedAt: '2030-01-01T00:00:00Z',
  source: 'empty', ownedBySession: null, uploadCheckpointAt: null, runCheckpointAt: null, sizeBytes: 0, fileCount: 0,
};

function full(): never {
  throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
}

test('a write the disk has no room for is a 503 naming the workspace index; other failures pass unchanged', async () => {
  const store = new SqliteWorkspaceStore(':memory:');
  const failing = Object.assign(Object.create(store) as SqliteWorkspaceStore, { insert: async () => full(), delete: () => { throw new Error('other'); } });
  const translated = translatingFullDisk(failing);
  await assert.rejects(translated.insert(record), (error: unknown) => {
    assert.ok(error instanceof BerthError);
    assert.equal(error.code, 'BERTH_ERR_STORAGE_FULL');
    assert.match(error.message, /workspace index cannot be written: its disk is full/);
    return true;
  });
  assert.throws(() => translated.delete(record.id), /other/);
  // Reads and writes that succeed are untouched.
  const working = translatingFullDisk(store);
  await working.insert(record);
  assert.equal((await working.get(record.id))?.owner, 'alice');
  store.close();
});
