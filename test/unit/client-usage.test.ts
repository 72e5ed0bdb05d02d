// @berth/client's usage calls over a scripted fetch: GET /usage with its range in the query (and none when
// no range is given), GET /usage/runs/{run_id} with the id escaped in the path, and Berth's 404 for a run
// of another caller as the BerthError it is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Berth, BerthError, type RunUsageReport, type UsageReport } from '../../packages/client/src/index.js';

const COUNTERS = { requests: 2, input_tokens: 30, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, cost_usd: 0.000271, refused: 0 };
const REPORT: UsageReport = {
  caller: 'ada',
  from: '2030-01-01',
  to: '2030-01-02',
  limits: { usd_per_day: 5, tokens_per_day: null },
  today: { date: '2030-01-02', requests: 2, tokens: 47, cost_usd: 0.000271 },
  total: COUNTERS,
  days: [{ date: '2030-01-01', ...COUNTERS, requests: 0, input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cost_usd: 0 }, { date: '2030-01-02', ...COUNTERS }],
  runs: [{ run_id: 'run-1', session_id: '00000000-0000-4000-8000-000000000001', first_request_at: '2030-01-02T10:00:00.000Z', last_request_at: '2030-01-02T10:00:02.000Z', ...COUNTERS }],
};

function berthAnswering(answer: (request: Request) => Response) {
  const requests: Request[] = [];
  const fetch = (async (input: RequestInfo | URL) => {
    const request = input as Request;
    requests.push(request);
    return answer(request);
  }) as typeof globalThis.fetch;
  return { berth: new Berth({ url: 'http://berth.test', fetch, apiVersionCheck: 'off' }), requests };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

test('usage.get() asks GET /usage for the range given, and for the default range without one', async () => {
  const { berth, requests } = berthAnswering(() => json(REPORT));
  assert.deepEqual(await berth.usage.get({ from: '2030-01-01', to: '2030-01-02' }), REPORT);
  const url = new URL(requests[0]!.url);
  assert.equal(requests[0]!.method, 'GET');
  assert.equal(url.pathname, '/usage');
  assert.deepEqual(Object.fromEntries(url.searchParams), { from: '2030-01-01', to: '2030-01-02' });
  await berth.usage.get();
  assert.equal(new URL(requests[1]!.url).search, '');
});

test('usage.run() asks GET /usage/runs/{run_id}, the id escaped', async () => {
  const run: RunUsageReport = {
    run_id: 'run-1',
    first_request_at: '2030-01-02T10:00:00.000Z',
    last_request_at: '2030-01-02T10:00:02.000Z',
    totals: COUNTERS,
    requests: [{ at: '2030-01-02T10:00:00.000Z', model: 'claude-sonnet-4-5', status: 200, input_tokens: 30, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, cost_usd: 0.000271 }],
    egress: [{ at: '2030-01-02T10:00:01.000Z', method: 'CONNECT', host: 'other.test', port: 443, decision: 'refused_host', reason: 'not in the allowlist' }],
  };
  const { berth, requests } = berthAnswering(() => json(run));
  assert.deepEqual(await berth.usage.run('run-1'), run);
  assert.equal(new URL(requests[0]!.url).pathname, '/usage/runs/run-1');
  await berth.usage.run('run-1/../x').catch(() => undefined);
  assert.equal(new URL(requests[1]!.url).pathname, '/usage/runs/run-1%2F..%2Fx', 'an id never becomes another path');
});

test("another caller's run is a BerthError 404 with Berth's text", async () => {
  const { berth } = berthAnswering(() => json({ error: 'run run-2 not found', status: 'error' }, 404));
  await assert.rejects(berth.usage.run('run-2'), (e: unknown) => e instanceof BerthError && e.status === 404 && e.error === 'run run-2 not found');
});
