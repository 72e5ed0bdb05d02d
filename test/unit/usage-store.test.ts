// The UsageStore contract (test/support/usage-store-contract.ts) on the SQLite file, plus what only the file
// promises. The PostgreSQL run of the same contract is in postgres-stores.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteUsageStore } from '../../src/store/usage/sqlite-usage-store.js';
import { DAY2, usageStoreContract } from '../support/usage-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-usage-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;
const freshPath = () => join(dir, `usage-${(counter += 1)}.db`);

let lastPath = '';
usageStoreContract('sqlite file', {
  open: (now) => new SqliteUsageStore((lastPath = freshPath()), now),
  reopen: (now) => new SqliteUsageStore(lastPath, now),
});

describe('SqliteUsageStore file', () => {
  it('opens its file with synchronous=NORMAL and WAL (no fsync per model request)', async () => {
    const path = freshPath();
    const store = new SqliteUsageStore(path, () => DAY2);
    try {
      const db = new Database(path);
      try {
        assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      } finally {
        db.close();
      }
      // The pragma is per connection: read it from the store's own.
      const own = (store as unknown as { db: Database.Database }).db;
      assert.equal(own.pragma('synchronous', { simple: true }), 1); // 1 = NORMAL, 2 = FULL
    } finally {
      await store.close();
    }
  });
});
