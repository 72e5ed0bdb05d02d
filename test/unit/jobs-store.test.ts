// The JobStore contract (test/support/job-store-contract.ts) on SQLite, plus what only the SQLite file promises.
// The PostgreSQL run of the same contract is in postgres-stores.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteJobStore } from '../../src/store/jobs/sqlite-job-store.js';
import { jobStoreContract, newJob } from '../support/job-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-jobs-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;
const freshPath = () => join(dir, `jobs-${(fileCounter += 1)}.db`);

jobStoreContract('sqlite file', () => new SqliteJobStore(freshPath()));
jobStoreContract('sqlite in memory', () => new SqliteJobStore(':memory:'));

const T1 = '2030-01-01T00:00:01.000Z';

describe('SqliteJobStore file', () => {
  it('keeps its jobs across close and reopen', async () => {
    const path = freshPath();
    const first = new SqliteJobStore(path);
    await first.insert(newJob(1));
    await first.transition('job-1', ['pending'], { status: 'running' }, T1);
    await first.close();
    const second = new SqliteJobStore(path);
    try {
      assert.equal((await second.get('job-1'))?.status, 'running');
    } finally {
      await second.close();
    }
  });
});

describe('sqlite job store on a full disk', () => {
  it('reports a write that could not be committed, for an insert and for a transition', async () => {
    const path = freshPath();
    const store = new SqliteJobStore(path);
    await store.insert(newJob(1));
    // SQLite's page limit stands in for a full disk: the same SQLITE_FULL at commit.
    const Database = (await import('better-sqlite3')).default;
    const limiter = new Database(path);
    const pages = limiter.pragma('page_count', { simple: true }) as number;
    (store as unknown as { db: { pragma(s: string): unknown } }).db.pragma(`max_page_count = ${pages}`);
    limiter.close();
    await assert.rejects(store.insert(newJob(2, { request: { prompt: 'x'.repeat(64 * 1024) } })), (error: { code?: string }) => error.code === 'SQLITE_FULL');
    assert.equal(await store.get('job-2'), undefined);
    await assert.rejects(
      store.transition('job-1', ['pending'], { status: 'failed', error: 'e'.repeat(64 * 1024) }, T1),
      (error: { code?: string }) => error.code === 'SQLITE_FULL',
    );
    assert.equal((await store.get('job-1'))?.status, 'pending');
  });
});
