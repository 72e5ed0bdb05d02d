// Budgets outside the container: a run's max_budget_usd and the caller's daily limits, checked before each
// model request, counted through the recorder, reset at 00:00 UTC and found again after a restart.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { Budgets, formatUsd, type BudgetLimits } from '../../src/core/gateway/budgets.js';
import type { GrantHolder, ModelRequestRecord, UsageRecorder } from '../../src/core/gateway/gateway-types.js';
import { SqliteUsageStore } from '../../src/store/usage/sqlite-usage-store.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-budgets-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

const NOON = Date.parse('2026-11-26T12:00:00.000Z');
const LAST_MS = Date.parse('2026-11-26T23:59:59.999Z');
const MIDNIGHT = Date.parse('2026-11-27T00:00:00.000Z');

const holder = (extra: Partial<GrantHolder> = {}): GrantHolder => ({
  kind: 'run',
  runId: 'run-1',
  caller: 'caller-a',
  policy: { mode: 'none' },
  ...extra,
});

function request(costUsd: number, extra: Partial<ModelRequestRecord> = {}): ModelRequestRecord {
  return {
    at: NOON,
    caller: 'caller-a',
    runId: 'run-1',
    model: 'claude-sonnet-4-5',
    tokens: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 3, cache_read_input_tokens: 2 },
    costUsd,
    status: 200,
    ...extra,
  };
}

describe('Budgets', () => {
  let path: string;
  let store: SqliteUsageStore;
  const open = async (limits: BudgetLimits, now = NOON) => {
    const budgets = await Budgets.open(limits, store, now);
    return { budgets, recorder: budgets.recorder(store) as UsageRecorder };
  };
  beforeEach(() => {
    path = join(dir, `usage-${(counter += 1)}.db`);
    store = new SqliteUsageStore(path, () => NOON);
  });
  afterEach(() => store.close());

  it('admits a run below its max_budget_usd and refuses it exactly at the limit, naming it', async () => {
    const { budgets, recorder } = await open({});
    await recorder.recordRequest(request(0.009999));
    assert.deepEqual(await budgets.check(holder({ budgetUsd: 0.01 }), NOON), { ok: true });
    await recorder.recordRequest(request(0.000001));
    assert.deepEqual(await budgets.check(holder({ budgetUsd: 0.01 }), NOON), {
      ok: false,
      limit: 'run',
      message: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.01 USD used',
    });
    // Another run of the same caller is not held by this run's budget.
    assert.deepEqual(await budgets.check(holder({ runId: 'run-2', budgetUsd: 0.01 }), NOON), { ok: true });
  });

  it('names an agent\'s budget as the agent\'s', async () => {
    const { budgets, recorder } = await open({});
    await recorder.recordRequest(request(0.0123));
    const decision = await budgets.check(holder({ kind: 'agent', agentId: 'agent-1', budgetUsd: 0.01 }), NOON);
    assert.equal(decision.ok ? '' : decision.message, 'this agent\'s max_budget_usd (0.01 USD) is spent: 0.0123 USD used');
  });

  it('refuses a caller exactly at SERVICE_CALLER_BUDGET_USD_PER_DAY, for every run and at admission', async () => {
    const { budgets, recorder } = await open({ usdPerDay: 5 });
    await recorder.recordRequest(request(4.999999));
    assert.deepEqual(await budgets.admission('caller-a', NOON), { ok: true });
    await recorder.recordRequest(request(0.000001, { runId: 'run-2' }));
    const expected = {
      ok: false,
      limit: 'caller_usd_per_day',
      message: 'SERVICE_CALLER_BUDGET_USD_PER_DAY (5 USD) is spent for 2026-11-26 (UTC): 5 USD used; it resets at 00:00 UTC',
    };
    assert.deepEqual(await budgets.admission('caller-a', NOON), expected);
    assert.deepEqual(await budgets.check(holder({ runId: 'run-3' }), NOON), expected);
    assert.deepEqual(await budgets.admission('caller-b', NOON), { ok: true });
  });

  it('refuses a caller exactly at SERVICE_CALLER_TOKENS_PER_DAY, counting every kind of token', async () => {
    const { budgets, recorder } = await open({ tokensPerDay: 40 });
    await recorder.recordRequest(request(0)); // 20 tokens
    await recorder.recordRequest(request(0, { tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 19 } }));
    assert.deepEqual(await budgets.admission('caller-a', NOON), { ok: true });
    await recorder.recordRequest(request(0, { tokens: { input_tokens: 0, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } }));
    assert.deepEqual(await budgets.admission('caller-a', NOON), {
      ok: false,
      limit: 'caller_tokens_per_day',
      message: 'SERVICE_CALLER_TOKENS_PER_DAY (40 tokens) is spent for 2026-11-26 (UTC): 40 tokens used; it resets at 00:00 UTC',
    });
  });

  it('checks the run\'s budget before the caller\'s', async () => {
    const { budgets, recorder } = await open({ usdPerDay: 1 });
    await recorder.recordRequest(request(1));
    const decision = await budgets.check(holder({ budgetUsd: 0.5 }), NOON);
    assert.equal(decision.ok ? undefined : decision.limit, 'run');
  });

  it('resets the caller\'s limits at 00:00 UTC, not a millisecond before', async () => {
    const { budgets, recorder } = await open({ usdPerDay: 1, tokensPerDay: 1000 });
    await recorder.recordRequest(request(1, { at: LAST_MS }));
    assert.equal((await budgets.admission('caller-a', LAST_MS)).ok, false);
    assert.deepEqual(await budgets.admission('caller-a', MIDNIGHT), { ok: true });
    // The new day counts from zero: what it records is its own.
    await recorder.recordRequest(request(0.5, { at: MIDNIGHT }));
    assert.deepEqual(await budgets.admission('caller-a', MIDNIGHT), { ok: true });
    await recorder.recordRequest(request(0.5, { at: MIDNIGHT + 1 }));
    const decision = await budgets.admission('caller-a', MIDNIGHT + 1);
    assert.equal(decision.ok ? '' : decision.message, 'SERVICE_CALLER_BUDGET_USD_PER_DAY (1 USD) is spent for 2026-11-27 (UTC): 1 USD used; it resets at 00:00 UTC');
  });

  it('a run\'s budget spans days: it is not reset at midnight', async () => {
    const { budgets, recorder } = await open({});
    await recorder.recordRequest(request(0.01, { at: LAST_MS }));
    assert.equal((await budgets.check(holder({ budgetUsd: 0.01 }), MIDNIGHT)).ok, false);
  });

  it('after a restart, finds today\'s caller totals and a run\'s spend in the store', async () => {
    const first = await open({ usdPerDay: 1 });
    await first.recorder.recordRequest(request(0.6));
    await first.recorder.recordRequest(request(0.4, { runId: 'run-2' }));
    await first.recorder.recordRequest(request(1, { caller: 'caller-b', runId: 'run-3', at: NOON - 86_400_000 }));
    await store.close();
    store = new SqliteUsageStore(path, () => NOON);
    const { budgets } = await open({ usdPerDay: 1 });
    assert.equal((await budgets.admission('caller-a', NOON)).ok, false, 'today\'s 1 USD of caller-a counted again');
    assert.deepEqual(await budgets.admission('caller-b', NOON), { ok: true }, 'yesterday\'s spend does not count today');
    assert.equal((await budgets.check(holder({ budgetUsd: 0.6, caller: 'caller-c' }), NOON)).ok, false, 'run-1\'s 0.6 USD counted again');
    assert.equal((await budgets.check(holder({ budgetUsd: 0.61, caller: 'caller-c' }), NOON)).ok, true);
  });

  it('writes every record through to the store, egress decisions too', async () => {
    const { recorder } = await open({});
    await recorder.recordRequest(request(0.25));
    await recorder.recordEgress({ at: NOON, caller: 'caller-a', runId: 'run-1', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed' });
    assert.equal((await store.callerDay('caller-a', '2026-11-26')).costMicroUsd, 250_000);
    assert.equal((await store.egressOf('caller-a', 'run-1', 10)).length, 1);
  });

  it('with no limits configured, admits whatever was used', async () => {
    const { budgets, recorder } = await open({});
    await recorder.recordRequest(request(1000));
    assert.deepEqual(await budgets.check(holder(), NOON), { ok: true });
  });

  it('formats USD to the micro-dollar without trailing zeros', async () => {
    assert.equal(formatUsd(12_300), '0.0123');
    assert.equal(formatUsd(5_001_200), '5.0012');
    assert.equal(formatUsd(5_000_000), '5');
  });
});

describe('Budgets over a store that answers later (PostgreSQL)', () => {
  /** A usage source whose reads wait until the test lets them answer; counts them. */
  function slowSource(costOfRun: number) {
    const reads: { what: string; answer: () => void; fail: (error: Error) => void }[] = [];
    const wait = <T>(what: string, value: T) => new Promise<T>((resolve, reject) => {
      reads.push({ what, answer: () => resolve(value), fail: reject });
    });
    const empty = { requests: 0, refused: 0, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, costMicroUsd: 0 };
    return {
      reads,
      source: {
        callersOn: async () => new Map([['caller-a', { ...empty, costMicroUsd: 400_000 }]]),
        callerDay: (caller: string, day: string) => wait(`day ${caller} ${day}`, empty),
        runCostMicroUsd: (runId: string) => wait(`run ${runId}`, costOfRun),
      },
    };
  }
  const neverStored = { recordRequest: () => new Promise<void>(() => undefined), recordEgress: () => new Promise<void>(() => undefined) };

  it('answers a check from memory without reading the store, and counts a request before its record is stored', async () => {
    const { source, reads } = slowSource(0);
    const budgets = await Budgets.open({ usdPerDay: 0.5 }, source, NOON);
    assert.deepEqual(await budgets.check(holder(), NOON), { ok: true });
    assert.deepEqual(reads, [], 'today\'s total of caller-a was loaded at open');
    void budgets.recorder(neverStored).recordRequest(request(0.1));
    // The record is not stored yet (and never will be here): the next check counts it all the same.
    assert.equal((await budgets.check(holder(), NOON)).ok, false);
  });

  it('reads a missing total once for every request that needs it meanwhile', async () => {
    const { source, reads } = slowSource(7_000);
    const budgets = new Budgets({}, source);
    const checks = [1, 2, 3].map(() => budgets.check(holder({ budgetUsd: 0.01 }), NOON));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reads.map((read) => read.what), ['run run-1']);
    reads[0]!.answer();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reads.map((read) => read.what), ['run run-1', 'day caller-a 2026-11-26']);
    reads[1]!.answer();
    assert.deepEqual(await Promise.all(checks), [{ ok: true }, { ok: true }, { ok: true }]);
    assert.deepEqual(await budgets.check(holder({ budgetUsd: 0.01 }), NOON), { ok: true });
    assert.equal(reads.length, 2, 'loaded totals are kept');
  });

  it('counts a request recorded while its run\'s total is being read once, on top of what was read', async () => {
    const { source, reads } = slowSource(7_000);
    const budgets = new Budgets({}, source);
    const checking = budgets.check(holder({ budgetUsd: 0.01 }), NOON);
    const recording = budgets.recorder(neverStored).recordRequest(request(0.003));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(reads.filter((read) => read.what === 'run run-1').length, 1);
    for (const read of reads) read.answer();
    await new Promise((resolve) => setImmediate(resolve));
    for (const read of reads) read.answer();
    assert.deepEqual(await checking, { ok: true });
    void recording;
    await new Promise((resolve) => setImmediate(resolve));
    // 7000 read + 3000 recorded = 0.01 USD: spent, not 0.013 (counted twice) nor 0.007 (lost).
    assert.deepEqual(await budgets.check(holder({ budgetUsd: 0.01 }), NOON), {
      ok: false, limit: 'run', message: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.01 USD used',
    });
  });

  it('fails a check whose total cannot be read (never admits on an unknown total), and reads again next time', async () => {
    const { source, reads } = slowSource(0);
    const budgets = new Budgets({}, source);
    const failed = budgets.check(holder({ budgetUsd: 1 }), NOON);
    await new Promise((resolve) => setImmediate(resolve));
    reads[0]!.fail(new Error('connection refused'));
    await assert.rejects(failed, /connection refused/);
    const retried = budgets.check(holder({ budgetUsd: 1 }), NOON);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reads.map((read) => read.what), ['run run-1', 'run run-1']);
    reads[1]!.answer();
    await new Promise((resolve) => setImmediate(resolve));
    reads[2]!.answer();
    assert.deepEqual(await retried, { ok: true });
  });
});
