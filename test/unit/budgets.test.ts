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
  const open = (limits: BudgetLimits, now = NOON) => {
    const budgets = new Budgets(limits, store, now);
    return { budgets, recorder: budgets.recorder(store) as UsageRecorder };
  };
  beforeEach(() => {
    path = join(dir, `usage-${(counter += 1)}.db`);
    store = new SqliteUsageStore(path, () => NOON);
  });
  afterEach(() => store.close());

  it('admits a run below its max_budget_usd and refuses it exactly at the limit, naming it', () => {
    const { budgets, recorder } = open({});
    recorder.recordRequest(request(0.009999));
    assert.deepEqual(budgets.check(holder({ budgetUsd: 0.01 }), NOON), { ok: true });
    recorder.recordRequest(request(0.000001));
    assert.deepEqual(budgets.check(holder({ budgetUsd: 0.01 }), NOON), {
      ok: false,
      limit: 'run',
      message: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.01 USD used',
    });
    // Another run of the same caller is not held by this run's budget.
    assert.deepEqual(budgets.check(holder({ runId: 'run-2', budgetUsd: 0.01 }), NOON), { ok: true });
  });

  it('names an agent\'s budget as the agent\'s', () => {
    const { budgets, recorder } = open({});
    recorder.recordRequest(request(0.0123));
    const decision = budgets.check(holder({ kind: 'agent', agentId: 'agent-1', budgetUsd: 0.01 }), NOON);
    assert.equal(decision.ok ? '' : decision.message, 'this agent\'s max_budget_usd (0.01 USD) is spent: 0.0123 USD used');
  });

  it('refuses a caller exactly at SERVICE_CALLER_BUDGET_USD_PER_DAY, for every run and at admission', () => {
    const { budgets, recorder } = open({ usdPerDay: 5 });
    recorder.recordRequest(request(4.999999));
    assert.deepEqual(budgets.admission('caller-a', NOON), { ok: true });
    recorder.recordRequest(request(0.000001, { runId: 'run-2' }));
    const expected = {
      ok: false,
      limit: 'caller_usd_per_day',
      message: 'SERVICE_CALLER_BUDGET_USD_PER_DAY (5 USD) is spent for 2026-11-26 (UTC): 5 USD used; it resets at 00:00 UTC',
    };
    assert.deepEqual(budgets.admission('caller-a', NOON), expected);
    assert.deepEqual(budgets.check(holder({ runId: 'run-3' }), NOON), expected);
    assert.deepEqual(budgets.admission('caller-b', NOON), { ok: true });
  });

  it('refuses a caller exactly at SERVICE_CALLER_TOKENS_PER_DAY, counting every kind of token', () => {
    const { budgets, recorder } = open({ tokensPerDay: 40 });
    recorder.recordRequest(request(0)); // 20 tokens
    recorder.recordRequest(request(0, { tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 19 } }));
    assert.deepEqual(budgets.admission('caller-a', NOON), { ok: true });
    recorder.recordRequest(request(0, { tokens: { input_tokens: 0, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } }));
    assert.deepEqual(budgets.admission('caller-a', NOON), {
      ok: false,
      limit: 'caller_tokens_per_day',
      message: 'SERVICE_CALLER_TOKENS_PER_DAY (40 tokens) is spent for 2026-11-26 (UTC): 40 tokens used; it resets at 00:00 UTC',
    });
  });

  it('checks the run\'s budget before the caller\'s', () => {
    const { budgets, recorder } = open({ usdPerDay: 1 });
    recorder.recordRequest(request(1));
    const decision = budgets.check(holder({ budgetUsd: 0.5 }), NOON);
    assert.equal(decision.ok ? undefined : decision.limit, 'run');
  });

  it('resets the caller\'s limits at 00:00 UTC, not a millisecond before', () => {
    const { budgets, recorder } = open({ usdPerDay: 1, tokensPerDay: 1000 });
    recorder.recordRequest(request(1, { at: LAST_MS }));
    assert.equal(budgets.admission('caller-a', LAST_MS).ok, false);
    assert.deepEqual(budgets.admission('caller-a', MIDNIGHT), { ok: true });
    // The new day counts from zero: what it records is its own.
    recorder.recordRequest(request(0.5, { at: MIDNIGHT }));
    assert.deepEqual(budgets.admission('caller-a', MIDNIGHT), { ok: true });
    recorder.recordRequest(request(0.5, { at: MIDNIGHT + 1 }));
    const decision = budgets.admission('caller-a', MIDNIGHT + 1);
    assert.equal(decision.ok ? '' : decision.message, 'SERVICE_CALLER_BUDGET_USD_PER_DAY (1 USD) is spent for 2026-11-27 (UTC): 1 USD used; it resets at 00:00 UTC');
  });

  it('a run\'s budget spans days: it is not reset at midnight', () => {
    const { budgets, recorder } = open({});
    recorder.recordRequest(request(0.01, { at: LAST_MS }));
    assert.equal(budgets.check(holder({ budgetUsd: 0.01 }), MIDNIGHT).ok, false);
  });

  it('after a restart, finds today\'s caller totals and a run\'s spend in the store', () => {
    const first = open({ usdPerDay: 1 });
    first.recorder.recordRequest(request(0.6));
    first.recorder.recordRequest(request(0.4, { runId: 'run-2' }));
    first.recorder.recordRequest(request(1, { caller: 'caller-b', runId: 'run-3', at: NOON - 86_400_000 }));
    store.close();
    store = new SqliteUsageStore(path, () => NOON);
    const { budgets } = open({ usdPerDay: 1 });
    assert.equal(budgets.admission('caller-a', NOON).ok, false, 'today\'s 1 USD of caller-a counted again');
    assert.deepEqual(budgets.admission('caller-b', NOON), { ok: true }, 'yesterday\'s spend does not count today');
    assert.equal(budgets.check(holder({ budgetUsd: 0.6, caller: 'caller-c' }), NOON).ok, false, 'run-1\'s 0.6 USD counted again');
    assert.equal(budgets.check(holder({ budgetUsd: 0.61, caller: 'caller-c' }), NOON).ok, true);
  });

  it('writes every record through to the store, egress decisions too', () => {
    const { recorder } = open({});
    recorder.recordRequest(request(0.25));
    recorder.recordEgress({ at: NOON, caller: 'caller-a', runId: 'run-1', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed' });
    assert.equal(store.callerDay('caller-a', '2026-11-26').costMicroUsd, 250_000);
    assert.equal(store.egressOf('caller-a', 'run-1', 10).length, 1);
  });

  it('with no limits configured, admits whatever was used', () => {
    const { budgets, recorder } = open({});
    recorder.recordRequest(request(1000));
    assert.deepEqual(budgets.check(holder(), NOON), { ok: true });
  });

  it('formats USD to the micro-dollar without trailing zeros', () => {
    assert.equal(formatUsd(12_300), '0.0123');
    assert.equal(formatUsd(5_001_200), '5.0012');
    assert.equal(formatUsd(5_000_000), '5');
  });
});
