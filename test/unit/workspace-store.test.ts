// The WorkspaceStore contract (test/support/workspace-store-contract.ts) on SQLite, plus what only the SQLite file
// promises. The PostgreSQL run of the same contract is in postgres-stores.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';
import { workspaceId, workspaceRecord, workspaceStoreContract } from '../support/workspace-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-workspace-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

const id = workspaceId;
const record = workspaceRecord;

workspaceStoreContract('sqlite file', () => new SqliteWorkspaceStore(join(dir, `ws-${(counter += 1)}.db`)));
workspaceStoreContract('sqlite in memory', () => new SqliteWorkspaceStore(':memory:'));

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
