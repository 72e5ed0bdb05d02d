// Usage and budgets on a real Berth, attacked: another caller cannot read a caller's usage (its runs are
// 404, its records never counted in another's GET /usage), a malformed period is a 400 naming the field,
// and a caller's spent daily budget is not reset by restarting Berth (the gateway's totals come back from
// usage.db), while another caller still runs.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { removeTestDir } from '../support/test-dir.js';

type Caller = 'alice' | 'bob';

const dataRoot = await mkdtemp(join(tmpdir(), 'berth-test-usage-'));
// Both starts share the data directory (usage.db); one token a day is spent by the first model request.
const env = { SERVICE_DATA_DIR: join(dataRoot, 'data'), SERVICE_CALLER_TOKENS_PER_DAY: '1' };
let t: TestBerth | undefined;

after(async () => {
  await t?.stop();
  await removeTestDir(dataRoot);
});

async function start(): Promise<(name: Caller) => Record<string, string>> {
  const started = await startBerthWithCallers(['alice', 'bob'] as const, env);
  t = started.t;
  return started.as;
}

test('a caller\'s usage is its own, and a spent daily budget survives a restart of Berth', async () => {
  let as = await start();
  // Alice's first run: admitted (nothing spent yet); its first model request is forwarded and spends the
  // day's token. Whether the engine needed a second request (then refused: the run ends with the 429) or
  // not, the day is spent afterwards.
  const first = await t!.request('POST', '/run', { prompt: 'say: hello' }, as('alice'));
  assert.ok(first.status === 200 || first.status === 429, JSON.stringify(first.body));
  const report = await t!.request('GET', '/usage', undefined, as('alice'));
  assert.equal(report.status, 200, JSON.stringify(report.body));
  assert.equal(report.body.caller, 'alice');
  assert.deepEqual(report.body.limits, { usd_per_day: null, tokens_per_day: 1 });
  assert.ok(report.body.today.tokens >= 1, JSON.stringify(report.body.today));
  const runId: string = report.body.runs[0].run_id;
  assert.ok(runId.startsWith('run-'), runId);
  assert.ok((await t!.request('GET', `/usage/runs/${runId}`, undefined, as('alice'))).body.requests.length >= 1);

  // Bob cannot read Alice's run, and her records are not in his usage.
  const stolen = await t!.request('GET', `/usage/runs/${runId}`, undefined, as('bob'));
  assert.equal(stolen.status, 404, JSON.stringify(stolen.body));
  assert.deepEqual(stolen.body, { error: `run ${runId} not found`, status: 'error' });
  const bobs = await t!.request('GET', '/usage', undefined, as('bob'));
  assert.equal(bobs.body.total.requests, 0);
  assert.deepEqual(bobs.body.runs, []);
  // A malformed period is the caller's mistake, named.
  const bad = await t!.request('GET', '/usage?from=2026-02-30', undefined, as('bob'));
  assert.equal(bad.status, 400);
  assert.match(bad.body.error, /^from: /);

  const refusedBefore = await t!.request('POST', '/run', { prompt: 'say: again' }, as('alice'));
  assert.equal(refusedBefore.status, 429, JSON.stringify(refusedBefore.body));
  assert.match(refusedBefore.body.error, /^model budget reached: SERVICE_CALLER_TOKENS_PER_DAY \(1 token\) is spent for \d{4}-\d{2}-\d{2} \(UTC\)/);

  // Restart over the same data: Alice's day stays spent; Bob's day is his own.
  assert.deepEqual(await t!.leftovers(), []);
  await t!.stop();
  t = undefined;
  as = await start();
  const refusedAfter = await t!.request('POST', '/run', { prompt: 'say: after the restart' }, as('alice'));
  assert.equal(refusedAfter.status, 429, JSON.stringify(refusedAfter.body));
  assert.match(refusedAfter.body.error, /SERVICE_CALLER_TOKENS_PER_DAY/);
  const bobRun = await t!.request('POST', '/run', { prompt: 'say: hello' }, as('bob'));
  assert.ok(bobRun.status === 200 || bobRun.status === 429, JSON.stringify(bobRun.body));
  if (bobRun.status === 429) assert.match(bobRun.body.error, /SERVICE_CALLER_TOKENS_PER_DAY/, 'bob was refused only by his own day, after his first request');
  const bobReport = await t!.request('GET', '/usage', undefined, as('bob'));
  assert.ok(bobReport.body.today.requests >= 1, 'bob\'s run reached the model');
  assert.deepEqual(await t!.leftovers(), []);
});
