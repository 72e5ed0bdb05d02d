// Issue 25's acceptance on a real Berth: every model request of a run goes through Berth's model gateway
// (the offline model sits behind it), from pooled engines and persistent agents too; the gateway counts
// each request for its run and its caller; a run's max_budget_usd and a caller's daily limit are enforced
// there, outside the container, and GET /usage adds up to the gateway's records.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, afterEach, before, describe, test } from 'node:test';
import { metric, poolReady, type TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { probeRun } from '../support/outside-hosts.js';
import { follow, turnEnded } from '../support/agents.js';
import type { RunReportView, UsageReportView } from '../../src/core/gateway/usage-report-schema.js';

type Caller = 'alice' | 'bob';

/**
 * A run's budget a few of the engine's requests exceed: the offline model answers as claude-opus-5-5 (priced as
 * Opus 5, 5 USD per million input tokens) and each request of a short run carries about 2,700 input tokens,
 * so it costs about 0.014 USD: two fit, the third crosses it.
 */
const RUN_BUDGET_USD = 0.03;
/** Steps the budget run asks for: far more than the budget pays for. */
const BUDGET_STEPS = 25;

const close = (a: number, b: number) => Math.abs(a - b) < 1e-6;

describe('the model gateway: pooled runs, agents, a run\'s budget, usage', () => {
  let t: TestBerth;
  let as: (name: Caller) => Record<string, string>;

  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], { SERVICE_POOL_SIZE: '1', SERVICE_AGENT_POOL_SIZE: '1' }));
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t?.stop();
  });

  async function runUsage(caller: Caller, runId: string): Promise<RunReportView> {
    const response = await t.request('GET', `/usage/runs/${runId}`, undefined, as(caller));
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body;
  }

  test('a pooled engine\'s run reaches the model through the gateway, counted as the caller\'s run', async () => {
    await poolReady(t, 1);
    const hits = await metric(t, 'berth_pool_hits_total{pool="run"}');
    const forwarded = await metric(t, 'berth_gateway_requests_total{outcome="forwarded"}');
    const run = await t.request('POST', '/run', { prompt: 'say: pooled answer' }, as('alice'));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.equal(run.body.output, 'pooled answer');
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="run"}'), hits + 1, 'the run took the pooled engine');
    const usage = await runUsage('alice', run.body.id);
    assert.ok(usage.requests.length >= 1, 'its model requests are recorded under its run');
    assert.ok(usage.requests.every((request) => request.status === 200 && request.input_tokens > 0 && request.cost_usd > 0), JSON.stringify(usage.requests));
    assert.ok((await metric(t, 'berth_gateway_requests_total{outcome="forwarded"}')) >= forwarded + usage.requests.length);
    // The pooled engine's run is alice's alone.
    assert.equal((await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('bob'))).status, 404);
  });

  test('a persistent agent from the pool reaches the model through the gateway; its turns are counted under the agent', async () => {
    await poolReady(t, 1, 'agent');
    const hits = await metric(t, 'berth_pool_hits_total{pool="agent"}');
    const spawned = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const id: string = spawned.body.id;
    const deadline = Date.now() + 60_000;
    while ((await t.request('GET', `/agents/${id}`, undefined, as('alice'))).body.status !== 'idle') {
      assert.ok(Date.now() < deadline, 'the agent becomes idle');
      await delay(50);
    }
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="agent"}'), hits + 1, 'the agent took the pooled engine');
    let turnId = '';
    const stream = follow(`${t.url}/agents/${id}/stream`, (frames) => turnId !== '' && turnEnded(turnId)(frames), as('alice'));
    await stream.ready;
    const sent = await t.request('POST', `/agents/${id}/send`, { prompt: 'say: agent answer' }, as('alice'));
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    turnId = sent.body.turn_id;
    const frames = await stream.done;
    assert.ok(frames.some((frame) => frame.event === 'turn_end' && frame.data.turn_id === turnId), JSON.stringify(frames.map((f) => f.event)));
    assert.ok(frames.some((frame) => frame.event === 'output' && String(frame.data.content).includes('agent answer')), 'the turn\'s answer came from the model');
    const report = await t.request('GET', '/usage', undefined, as('alice'));
    const agentRun = (report.body.runs as { run_id: string; agent_id?: string; requests: number }[]).find((run) => run.agent_id === id);
    assert.ok(agentRun && agentRun.requests >= 1, `the agent's requests are counted under it: ${JSON.stringify(report.body.runs)}`);
    assert.equal((await t.request('DELETE', `/agents/${id}`, undefined, as('alice'))).status, 204);
  });

  test('a run stops with 429 once its max_budget_usd is spent: the gateway refuses its next model request', async () => {
    const steps = Array.from({ length: BUDGET_STEPS }, (_, index) => `run: echo step-${index}`).join('\n');
    const refusedBefore = await metric(t, 'berth_gateway_requests_total{outcome="refused_budget"}');
    const run = await t.request('POST', '/run', { prompt: steps, engine: { max_budget_usd: RUN_BUDGET_USD } }, as('alice'));
    assert.equal(run.status, 429, JSON.stringify(run.body));
    assert.equal(run.body.status, 'error');
    assert.match(run.body.error, /^model budget reached: this run's max_budget_usd \(0\.03 USD\) is spent: [\d.]+ USD used/);
    assert.equal(await metric(t, 'berth_gateway_requests_total{outcome="refused_budget"}'), refusedBefore + 1, 'one request refused: the engine does not retry a 403');

    // The refused run is alice's latest; its records show what it spent and the refusal.
    const report = await t.request('GET', '/usage', undefined, as('alice'));
    const latest = report.body.runs[0] as { run_id: string; refusal?: string; refused: number };
    assert.match(latest.refusal ?? '', /max_budget_usd/);
    const usage = await runUsage('alice', latest.run_id);
    const forwarded = usage.requests.filter((request) => request.refusal === undefined);
    const refused = usage.requests.filter((request) => request.refusal !== undefined);
    assert.equal(refused.length, 1, JSON.stringify(usage.requests));
    assert.equal(refused[0]!.status, 403);
    assert.ok(forwarded.length >= 2 && forwarded.length < BUDGET_STEPS, `a few requests were paid for, not all ${BUDGET_STEPS + 1}: ${forwarded.length}`);
    const spent = forwarded.reduce((sum, request) => sum + request.cost_usd, 0);
    assert.ok(spent >= RUN_BUDGET_USD, `spent ${spent} USD before the refusal`);
    assert.ok(spent - forwarded.at(-1)!.cost_usd < RUN_BUDGET_USD, 'the request before the last was still under the budget');
  });

  test('code in a run cannot spend past its max_budget_usd by calling the model itself: the gateway refuses, the run ends with 429', async () => {
    // The engine counts only its own requests; these go around it, with the run's credential, each with a
    // prompt of 40,000 characters (about 10,000 tokens, 0.03 USD as Sonnet).
    const budget = 0.05;
    const spend = Array.from({ length: 8 }, (_, index) => `model spend-${index} "$ANTHROPIC_API_KEY" 40000`);
    const run = await t.request('POST', '/run', { prompt: `${probeRun(...spend)}\nsay: not reached`, engine: { max_budget_usd: budget } }, as('bob'));
    assert.equal(run.status, 429, JSON.stringify(run.body));
    assert.match(run.body.error, /^model budget reached: this run's max_budget_usd \(0\.05 USD\) is spent: [\d.]+ USD used/);
    const report = await t.request('GET', '/usage', undefined, as('bob'));
    const usage = await runUsage('bob', report.body.runs[0].run_id);
    const firstRefused = usage.requests.findIndex((request) => request.refusal !== undefined);
    assert.ok(firstRefused > 0, JSON.stringify(usage.requests));
    const forwarded = usage.requests.slice(0, firstRefused);
    assert.ok(usage.requests.slice(firstRefused).every((request) => request.status === 403 && request.refusal !== undefined), 'nothing is forwarded once the budget is spent');
    const spent = forwarded.reduce((sum, request) => sum + request.cost_usd, 0);
    assert.ok(spent >= budget && spent - forwarded.at(-1)!.cost_usd < budget, `forwarded until the budget was spent: ${spent} USD`);
  });

  test('GET /usage adds up to the gateway\'s records, for each caller', async () => {
    const bobRun = await t.request('POST', '/run', { prompt: 'run: echo bob was here' }, as('bob'));
    assert.equal(bobRun.status, 200, JSON.stringify(bobRun.body));
    const inputTokens: number[] = [];
    for (const caller of ['alice', 'bob'] as const) {
      const report = await t.request('GET', '/usage', undefined, as(caller));
      assert.equal(report.status, 200, JSON.stringify(report.body));
      const { total, days, runs } = report.body as UsageReportView;
      assert.ok(total.requests > 0, `${caller} has usage`);
      // The days and the runs each add up to the total…
      for (const parts of [days, runs]) {
        for (const field of ['requests', 'input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'refused'] as const) {
          assert.equal(parts.reduce((sum, part) => sum + part[field], 0), total[field], `${caller}: ${field}`);
        }
        assert.ok(close(parts.reduce((sum, part) => sum + part.cost_usd, 0), total.cost_usd), `${caller}: cost_usd`);
      }
      // …and every run's total is the sum of its recorded requests.
      for (const run of runs) {
        const usage = await runUsage(caller, run.run_id);
        assert.equal(usage.requests.length, run.requests, `${caller} ${run.run_id}: requests`);
        assert.equal(usage.requests.reduce((sum, request) => sum + request.input_tokens, 0), run.input_tokens);
        assert.equal(usage.requests.reduce((sum, request) => sum + request.output_tokens, 0), run.output_tokens);
        assert.ok(close(usage.requests.reduce((sum, request) => sum + request.cost_usd, 0), run.cost_usd));
      }
      assert.equal(report.body.today.requests, total.requests, 'all of it today');
      inputTokens.push(total.input_tokens);
    }
    // Independently of the store: the gateway's own counter of forwarded input tokens, over both callers.
    assert.equal(await metric(t, 'berth_model_tokens_total{kind="input"}'), inputTokens[0]! + inputTokens[1]!);
  });
});

describe('a caller\'s daily budget', () => {
  let t: TestBerth;
  let as: (name: Caller) => Record<string, string>;
  /** Below the cost of one request of the offline model: the first run spends it. */
  const perDay = 0.001;

  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], { SERVICE_CALLER_BUDGET_USD_PER_DAY: String(perDay), SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }));
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t?.stop();
  });

  test('once a caller has spent SERVICE_CALLER_BUDGET_USD_PER_DAY, their next run is refused before any container; others go on', async () => {
    const first = await t.request('POST', '/run', { prompt: 'say: first' }, as('alice'));
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const started = await metric(t, 'berth_runs_total{mode="sync",outcome="completed"}');
    const next = await t.request('POST', '/run', { prompt: 'say: second' }, as('alice'));
    assert.equal(next.status, 429, JSON.stringify(next.body));
    assert.match(next.body.error, /^model budget reached: SERVICE_CALLER_BUDGET_USD_PER_DAY \(0\.001 USD\) is spent for \d{4}-\d{2}-\d{2} \(UTC\): [\d.]+ USD used; it resets at 00:00 UTC$/);
    const agent = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(agent.status, 429, JSON.stringify(agent.body));
    assert.equal(await metric(t, 'berth_runs_total{mode="sync",outcome="completed"}'), started);
    const report = await t.request('GET', '/usage', undefined, as('alice'));
    assert.equal(report.body.limits.usd_per_day, perDay);
    assert.ok(report.body.today.cost_usd >= perDay, JSON.stringify(report.body.today));

    const bob = await t.request('POST', '/run', { prompt: 'say: bob still runs' }, as('bob'));
    assert.equal(bob.status, 200, JSON.stringify(bob.body));
    assert.equal(bob.body.output, 'bob still runs');
  });
});
