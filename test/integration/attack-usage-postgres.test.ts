// Usage and budgets on a real Berth whose stores are on PostgreSQL (SERVICE_DATABASE_URL, issue 26), attacked:
// a caller who spent the day's budget hopes a node started afresh (a new data directory: no usage file of its
// own, as another node or a replaced host has) lets them run again. The day's total is in the database: the
// new start refuses them before any container, and their records are still theirs alone. A throw-away
// PostgreSQL 15 (test/support/postgres.ts); nothing is left of it, nor of either Berth.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { startPostgres, type TestPostgres } from '../support/postgres.js';
import { removeTestDir } from '../support/test-dir.js';

type Caller = 'alice' | 'bob';

const dataRoot = await mkdtemp(join(tmpdir(), 'berth-test-usage-pg-'));
let server: TestPostgres;
let databaseUrl: string;
let t: TestBerth | undefined;
let starts = 0;

before(async () => {
  server = await startPostgres();
  databaseUrl = (await server.createDatabase('usage')).url;
});

after(async () => {
  await t?.stop();
  await server?.stop();
  await removeTestDir(dataRoot);
  assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
});

/** A Berth on the shared database with a data directory of its own, never used before. */
async function startFresh(): Promise<(name: Caller) => Record<string, string>> {
  const started = await startBerthWithCallers(['alice', 'bob'] as const, {
    SERVICE_DATA_DIR: join(dataRoot, `data-${(starts += 1)}`),
    SERVICE_DATABASE_URL: databaseUrl,
    // Each start is another node (as a replaced host is); no other node asks it anything here.
    SERVICE_NODE_NAME: `usage-node-${starts}`,
    SERVICE_NODE_URL: 'http://127.0.0.1:9',
    SERVICE_POOL_SIZE: '0',
    SERVICE_AGENT_POOL_SIZE: '0',
    // One token a day: the first model request spends it.
    SERVICE_CALLER_TOKENS_PER_DAY: '1',
  });
  t = started.t;
  return started.as;
}

test('a spent daily budget is not reset by a Berth started afresh on the same database; the records stay the caller\'s own', async () => {
  let as = await startFresh();
  const first = await t!.request('POST', '/run', { prompt: 'say: hello' }, as('alice'));
  assert.ok(first.status === 200 || first.status === 429, JSON.stringify(first.body));
  const report = await t!.request('GET', '/usage', undefined, as('alice'));
  assert.equal(report.status, 200, JSON.stringify(report.body));
  assert.ok(report.body.today.tokens >= 1, JSON.stringify(report.body.today));
  const runId: string = report.body.runs[0].run_id;
  assert.equal((await t!.request('POST', '/run', { prompt: 'say: again' }, as('alice'))).status, 429);
  assert.deepEqual(await t!.leftovers(), []);
  await t!.stop();
  t = undefined;

  // A new data directory: nothing of the first start's files. The day's total comes from the database.
  as = await startFresh();
  const refused = await t!.request('POST', '/run', { prompt: 'say: after a fresh start' }, as('alice'));
  assert.equal(refused.status, 429, JSON.stringify(refused.body));
  assert.match(refused.body.error, /^model budget reached: SERVICE_CALLER_TOKENS_PER_DAY \(1 token\) is spent for \d{4}-\d{2}-\d{2} \(UTC\)/);
  const kept = await t!.request('GET', `/usage/runs/${runId}`, undefined, as('alice'));
  assert.equal(kept.status, 200, JSON.stringify(kept.body));
  assert.ok(kept.body.requests.length >= 1, 'the first start\'s records are served by the second');
  // Another caller still cannot read them, and is not held by them.
  const stolen = await t!.request('GET', `/usage/runs/${runId}`, undefined, as('bob'));
  assert.deepEqual(stolen.body, { error: `run ${runId} not found`, status: 'error' });
  assert.equal((await t!.request('GET', '/usage', undefined, as('bob'))).body.total.requests, 0);
  const bobRun = await t!.request('POST', '/run', { prompt: 'say: hello' }, as('bob'));
  assert.ok(bobRun.status === 200 || bobRun.status === 429, JSON.stringify(bobRun.body));
  if (bobRun.status === 429) assert.match(bobRun.body.error, /SERVICE_CALLER_TOKENS_PER_DAY/, 'bob was refused only by his own day, after his first request');
  assert.deepEqual(await t!.leftovers(), []);
});
