// GET /usage and GET /usage/runs/:run_id through Fastify: the period's checks (400 naming from or to), only
// the caller's own records (another caller's run is 404), and totals that add up to what was recorded.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { TokenClaims } from '../../src/core/auth/tokens.js';
import { Budgets } from '../../src/core/gateway/budgets.js';
import { UsageReport } from '../../src/core/gateway/usage-report.js';
import type { ModelRequestRecord, UsageRecorder } from '../../src/core/gateway/gateway-types.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { registerUsageRoutes } from '../../src/http/routes/usage.js';
import { ErrorBodySchema } from '../../src/http/schemas.js';
import { createValidatorCompiler } from '../../src/http/validators.js';
import { SqliteUsageStore } from '../../src/store/usage/sqlite-usage-store.js';

const NOW = Date.parse('2026-11-26T12:00:00.000Z');
const DAY_MS = 86_400_000;

let app: FastifyInstance;
let store: SqliteUsageStore;
let recorder: UsageRecorder;
const recorded: ModelRequestRecord[] = [];

async function record(extra: Partial<ModelRequestRecord>): Promise<void> {
  const entry: ModelRequestRecord = {
    at: NOW,
    caller: 'caller-a',
    runId: 'run-a1',
    sessionId: '3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55',
    model: 'claude-sonnet-4-5',
    tokens: { input_tokens: 1000, output_tokens: 100, cache_creation_input_tokens: 10, cache_read_input_tokens: 500 },
    costUsd: 0.004688,
    status: 200,
    ...extra,
  };
  recorded.push(entry);
  await recorder.recordRequest(entry);
}

/** A request as the given caller, as the auth plugin leaves it (its token's `sub`). */
const as = (caller: string, url: string) => app.inject({ method: 'GET', url, headers: { 'x-test-caller': caller } });

before(async () => {
  store = new SqliteUsageStore(':memory:', () => NOW);
  const limits = { usdPerDay: 5 };
  recorder = (await Budgets.open(limits, store, NOW)).recorder(store);
  app = Fastify();
  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  app.addSchema(ErrorBodySchema);
  app.decorateRequest('auth', undefined);
  app.addHook('onRequest', async (request) => {
    request.auth = { sub: String(request.headers['x-test-caller']) } as TokenClaims;
  });
  registerUsageRoutes(app, { usage: new UsageReport(store, limits, () => NOW) });
  await app.ready();

  await record({ at: NOW - 2 * DAY_MS, runId: 'run-a0', costUsd: 0.01 });
  await record({});
  await record({ at: NOW + 1000, costUsd: 0.002, tokens: { input_tokens: 7, output_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } });
  await record({ at: NOW + 2000, status: 403, costUsd: 0, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, refusal: { limit: 'run', message: 'this run\'s max_budget_usd (0.006 USD) is spent: 0.006688 USD used' } });
  await record({ at: NOW + 3000, runId: 'run-agent', agentId: 'agent-1' });
  await record({ at: NOW - 10 * DAY_MS, runId: 'run-a-old' });
  await record({ caller: 'caller-b', runId: 'run-b1', costUsd: 1 });
  await recorder.recordEgress({ at: NOW + 1500, caller: 'caller-a', runId: 'run-a1', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed' });
  await recorder.recordEgress({ at: NOW + 1600, caller: 'caller-a', runId: 'run-a1', method: 'HTTP', host: 'other.test', port: 80, decision: 'refused_host', reason: 'other.test is not in container.network.allow' });
});
after(async () => {
  await app.close();
  await store.close();
});

describe('GET /usage', () => {
  it('defaults to the last 7 days, today included, and adds up to the caller\'s records in them', async () => {
    const answer = await as('caller-a', '/usage');
    assert.equal(answer.statusCode, 200, answer.body);
    const report = answer.json();
    assert.equal(report.caller, 'caller-a');
    assert.equal(report.from, '2026-11-20');
    assert.equal(report.to, '2026-11-26');
    assert.deepEqual(report.limits, { usd_per_day: 5, tokens_per_day: null });
    assert.equal(report.days.length, 7);
    const inPeriod = recorded.filter((entry) => entry.caller === 'caller-a' && entry.at >= Date.parse('2026-11-20T00:00:00Z'));
    assert.equal(report.total.requests, inPeriod.length);
    assert.equal(report.total.refused, 1);
    assert.equal(report.total.input_tokens, inPeriod.reduce((sum, entry) => sum + entry.tokens.input_tokens, 0));
    assert.equal(Math.round(report.total.cost_usd * 1e6), Math.round(inPeriod.reduce((sum, entry) => sum + entry.costUsd, 0) * 1e6));
    // The days add up to the total, field by field.
    for (const field of ['requests', 'input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'refused']) {
      assert.equal(report.days.reduce((sum: number, day: Record<string, number>) => sum + day[field]!, 0), report.total[field], field);
    }
    assert.equal(Math.round(report.days.reduce((sum: number, day: { cost_usd: number }) => sum + day.cost_usd * 1e6, 0)), Math.round(report.total.cost_usd * 1e6));
    assert.deepEqual(report.days.map((day: { date: string; requests: number }) => [day.date, day.requests]), [
      ['2026-11-20', 0], ['2026-11-21', 0], ['2026-11-22', 0], ['2026-11-23', 0], ['2026-11-24', 1], ['2026-11-25', 0], ['2026-11-26', 4],
    ]);
    assert.deepEqual(report.today, { date: '2026-11-26', requests: 4, tokens: 1610 * 2 + 10, cost_usd: 0.011376 });
  });

  it('lists the caller\'s runs latest first, with session, agent and the refusal', async () => {
    const report = (await as('caller-a', '/usage')).json();
    assert.deepEqual(report.runs.map((run: { run_id: string }) => run.run_id), ['run-agent', 'run-a1', 'run-a0']);
    const run = report.runs[1];
    assert.equal(run.requests, 3);
    assert.equal(run.refused, 1);
    assert.match(run.refusal, /max_budget_usd \(0\.006 USD\) is spent/);
    assert.equal(run.first_request_at, new Date(NOW).toISOString());
    assert.equal(report.runs[0].agent_id, 'agent-1');
  });

  it('never counts another caller\'s records', async () => {
    const report = (await as('caller-b', '/usage')).json();
    assert.equal(report.total.requests, 1);
    assert.equal(report.total.cost_usd, 1);
    assert.deepEqual(report.runs.map((run: { run_id: string }) => run.run_id), ['run-b1']);
    const nobody = (await as('caller-c', '/usage')).json();
    assert.equal(nobody.total.requests, 0);
    assert.deepEqual(nobody.runs, []);
  });

  it('takes a period of its own', async () => {
    const report = (await as('caller-a', '/usage?from=2026-11-16&to=2026-11-16')).json();
    assert.deepEqual(report.days.map((day: { date: string }) => day.date), ['2026-11-16']);
    assert.equal(report.total.requests, 1);
    assert.deepEqual(report.runs.map((run: { run_id: string }) => run.run_id), ['run-a-old']);
  });

  for (const [query, field] of [
    ['from=2026-11-31', 'from'],
    ['from=26-11-2026', 'from'],
    ['to=yesterday', 'to'],
    ['to=2026-02-29', 'to'],
    ['from=2026-11-27&to=2026-11-26', 'from'],
    ['from=2026-01-01&to=2026-11-26', 'from'],
  ] as const) {
    it(`answers 400 naming ${field} for ${query}`, async () => {
      const answer = await as('caller-a', `/usage?${query}`);
      assert.equal(answer.statusCode, 400, answer.body);
      assert.equal(answer.json().status, 'error');
      assert.match(answer.json().error, new RegExp(`^${field}\\b`));
    });
  }

  it('accepts exactly 92 days', async () => {
    const answer = await as('caller-a', '/usage?from=2026-08-27&to=2026-11-26');
    assert.equal(answer.statusCode, 200, answer.body);
    assert.equal(answer.json().days.length, 92);
  });
});

describe('GET /usage/runs/:run_id', () => {
  it('answers the run\'s totals, requests and egress decisions', async () => {
    const answer = await as('caller-a', '/usage/runs/run-a1');
    assert.equal(answer.statusCode, 200, answer.body);
    const run = answer.json();
    assert.equal(run.run_id, 'run-a1');
    assert.equal(run.totals.requests, 3);
    assert.equal(run.requests.length, 3);
    assert.deepEqual(run.requests.map((request: { status: number }) => request.status), [200, 200, 403]);
    assert.match(run.requests[2].refusal, /max_budget_usd/);
    assert.equal(run.totals.input_tokens, run.requests.reduce((sum: number, request: { input_tokens: number }) => sum + request.input_tokens, 0));
    assert.deepEqual(run.egress.map((decision: { host: string; decision: string }) => [decision.host, decision.decision]), [
      ['pypi.org', 'allowed'],
      ['other.test', 'refused_host'],
    ]);
    assert.equal(run.egress[1].reason, 'other.test is not in container.network.allow');
  });

  it('answers 404 for another caller\'s run, as for an unknown one', async () => {
    for (const [caller, runId] of [['caller-b', 'run-a1'], ['caller-a', 'run-b1'], ['caller-a', 'run-none']] as const) {
      const answer = await as(caller, `/usage/runs/${runId}`);
      assert.equal(answer.statusCode, 404, `${caller} ${runId}`);
      assert.deepEqual(answer.json(), { error: `run ${runId} not found`, status: 'error' });
    }
  });
});
