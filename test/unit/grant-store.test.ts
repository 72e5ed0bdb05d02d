// The GrantStore contract (test/support/grant-store-contract.ts) on the SQLite file. The PostgreSQL run of the
// same contract, and its nodes kept apart, are in postgres-stores.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { SqliteGrantStore } from '../../src/store/gateway/sqlite-grant-store.js';
import { grantStoreContract } from '../support/grant-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-grant-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;
let lastPath = '';

grantStoreContract('sqlite file', {
  open: () => new SqliteGrantStore((lastPath = join(dir, `grants-${(counter += 1)}.db`))),
  reopen: () => new SqliteGrantStore(lastPath),
});
