// The UsageStore contract (src/store/usage/usage-store.ts) as one suite any backend runs: pass a name and a
// function that opens a fresh, empty store whose clock reads `now`, and one that reopens the same records (a
// restart). Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { EGRESS_RETENTION_MS, type EgressDecisionRecord, type ModelRequestRecord, type UsageStore } from '../../src/store/usage/usage-store.js';

export const DAY1 = Date.parse('2026-11-25T23:59:59.999Z');
export const DAY2 = Date.parse('2026-11-26T00:00:00.000Z');

const NO_TOKENS = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };

/** Text a container can put in a request body or a host name: quotes, a NUL, characters beyond the BMP. */
const AWKWARD_TEXT = 'say "hi" \\ back\n\u0000nul é 漢字 🚀 \u2028';

export function usageRequest(extra: Partial<ModelRequestRecord> = {}): ModelRequestRecord {
  return {
    at: DAY2 + 1000,
    caller: 'caller-a',
    runId: 'run-1',
    sessionId: 'session-1',
    model: 'claude-sonnet-4-5',
    tokens: { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 5, cache_read_input_tokens: 50 },
    costUsd: 0.000484,
    status: 200,
    overheadMs: 0.7,
    ...extra,
  };
}

export function egressDecision(extra: Partial<EgressDecisionRecord> = {}): EgressDecisionRecord {
  return { at: DAY2 + 2000, caller: 'caller-a', runId: 'run-1', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed', ...extra };
}

export interface UsageStoreOpeners {
  /** A fresh, empty store whose clock reads `now`. */
  open(now: () => number): UsageStore | Promise<UsageStore>;
  /** The same records as the store `open` answered last, opened again (that store is closed first). */
  reopen(now: () => number): UsageStore | Promise<UsageStore>;
}

export function usageStoreContract(name: string, openers: UsageStoreOpeners): void {
  describe(`UsageStore contract: ${name}`, () => {
    let store: UsageStore;
    beforeEach(async () => {
      store = await openers.open(() => DAY2);
    });
    afterEach(() => store.close());

    const reopen = async () => {
      await store.close();
      store = await openers.reopen(() => DAY2);
    };

    it('sums a caller\'s requests per UTC day, a request at 23:59:59.999 on the day before', async () => {
      await store.recordRequest(usageRequest({ at: DAY1 }));
      await store.recordRequest(usageRequest());
      await store.recordRequest(usageRequest({ costUsd: 0.000001, tokens: { ...NO_TOKENS, input_tokens: 1 } }));
      await store.recordRequest(usageRequest({ caller: 'caller-b' }));
      const days = await store.days('caller-a', '2026-11-25', '2026-11-26');
      assert.deepEqual(days.map((day) => [day.day, day.requests, day.tokens.input_tokens, day.costMicroUsd]), [
        ['2026-11-25', 1, 100, 484],
        ['2026-11-26', 2, 101, 485],
      ]);
      assert.equal((await store.callerDay('caller-a', '2026-11-26')).costMicroUsd, 485);
      assert.deepEqual(await store.callerDay('caller-a', '2026-11-27'), { requests: 0, refused: 0, tokens: NO_TOKENS, costMicroUsd: 0 });
      assert.deepEqual([...(await store.callersOn('2026-11-26')).keys()].sort(), ['caller-a', 'caller-b']);
      assert.deepEqual((await store.callersOn('2026-11-26')).get('caller-b'), {
        requests: 1, refused: 0, tokens: usageRequest().tokens, costMicroUsd: 484,
      });
    });

    it('counts refused requests apart and keeps the latest refusal of a run', async () => {
      await store.recordRequest(usageRequest());
      await store.recordRequest(usageRequest({ at: DAY2 + 5000, status: 403, tokens: NO_TOKENS, costUsd: 0, refusal: { limit: 'run', message: 'first' } }));
      await store.recordRequest(usageRequest({ at: DAY2 + 6000, status: 403, tokens: NO_TOKENS, costUsd: 0, refusal: { limit: 'caller_usd_per_day', message: 'second' } }));
      const run = await store.run('caller-a', 'run-1');
      assert.equal(run?.requests, 3);
      assert.equal(run?.refused, 2);
      assert.equal(run?.refusal, 'second');
      assert.equal((await store.runs('caller-a', '2026-11-26', '2026-11-26', 500))[0]?.refusal, 'second');
      assert.equal((await store.callerDay('caller-a', '2026-11-26')).refused, 2);
      assert.equal(await store.runCostMicroUsd('run-1'), 484);
      assert.equal(await store.runCostMicroUsd('run-unknown'), 0);
    });

    it('answers only the caller\'s own runs, requests and egress decisions', async () => {
      await store.recordRequest(usageRequest());
      await store.recordEgress(egressDecision());
      assert.equal(await store.run('caller-b', 'run-1'), undefined);
      assert.deepEqual(await store.requestsOf('caller-b', 'run-1', 500), []);
      assert.deepEqual(await store.egressOf('caller-b', 'run-1', 500), []);
      assert.deepEqual(await store.runs('caller-b', '2026-11-26', '2026-11-26', 500), []);
      assert.equal((await store.requestsOf('caller-a', 'run-1', 500)).length, 1);
      assert.equal((await store.egressOf('caller-a', 'run-1', 500)).length, 1);
    });

    it('finds a run that only made egress decisions (a workspace clone), its times from them', async () => {
      await store.recordEgress(egressDecision({ runId: 'clone-1', sessionId: 'session-9', decision: 'refused_host', reason: 'not on the list' }));
      await store.recordEgress(egressDecision({ runId: 'clone-1', at: DAY2 + 9000 }));
      assert.deepEqual(await store.run('caller-a', 'clone-1'), {
        runId: 'clone-1', caller: 'caller-a', sessionId: 'session-9', requests: 0, refused: 0, tokens: NO_TOKENS, costMicroUsd: 0,
        firstAt: DAY2 + 2000, lastAt: DAY2 + 9000,
      });
      assert.equal(await store.run('caller-a', 'run-unknown'), undefined);
    });

    it('spans a run\'s model requests and egress decisions in its first and last times', async () => {
      await store.recordEgress(egressDecision({ at: DAY2 + 10 }));
      await store.recordRequest(usageRequest({ at: DAY2 + 20 }));
      await store.recordEgress(egressDecision({ at: DAY2 + 30 }));
      const run = await store.run('caller-a', 'run-1');
      assert.equal(run?.firstAt, DAY2 + 10);
      assert.equal(run?.lastAt, DAY2 + 30);
      assert.equal(run?.requests, 1);
    });

    it('lists runs latest first, limited, with their session and agent, within the days asked', async () => {
      await store.recordRequest(usageRequest({ runId: 'run-old', at: DAY2 + 1 }));
      await store.recordRequest(usageRequest({ runId: 'run-agent', agentId: 'agent-1', at: DAY2 + 3 }));
      await store.recordRequest(usageRequest({ runId: 'run-mid', at: DAY2 + 2 }));
      await store.recordRequest(usageRequest({ runId: 'run-yesterday', at: DAY1 }));
      const runs = await store.runs('caller-a', '2026-11-26', '2026-11-26', 2);
      assert.deepEqual(runs.map((run) => run.runId), ['run-agent', 'run-mid']);
      assert.equal(runs[0]?.agentId, 'agent-1');
      assert.equal(runs[0]?.sessionId, 'session-1');
      assert.equal(runs[1]?.agentId, undefined);
      assert.deepEqual((await store.runs('caller-a', '2026-11-25', '2026-11-25', 500)).map((run) => run.runId), ['run-yesterday']);
    });

    it('orders runs of the same last moment by their id, byte-wise', async () => {
      for (const runId of ['run-b', 'run-B', 'run-a', 'run-é']) await store.recordRequest(usageRequest({ runId }));
      assert.deepEqual((await store.runs('caller-a', '2026-11-26', '2026-11-26', 500)).map((run) => run.runId), ['run-B', 'run-a', 'run-b', 'run-é']);
    });

    it('answers the latest requests of a run, oldest first, with every field it recorded', async () => {
      for (let i = 0; i < 5; i += 1) await store.recordRequest(usageRequest({ at: DAY2 + i }));
      const listed = await store.requestsOf('caller-a', 'run-1', 3);
      assert.deepEqual(listed.map((entry) => entry.at), [DAY2 + 2, DAY2 + 3, DAY2 + 4]);
      assert.deepEqual(listed[0], usageRequest({ at: DAY2 + 2 }));
    });

    it('keeps a refusal, an agent and the absence of overhead as recorded', async () => {
      const refused = usageRequest({ agentId: 'agent-1', status: 403, tokens: NO_TOKENS, costUsd: 0, overheadMs: undefined, refusal: { limit: 'caller_tokens_per_day', message: 'spent' } });
      delete (refused as { overheadMs?: number }).overheadMs;
      await store.recordRequest(refused);
      assert.deepEqual(await store.requestsOf('caller-a', 'run-1', 500), [refused]);
    });

    it('answers the latest egress decisions of a run, oldest first, with every field it recorded', async () => {
      for (let i = 0; i < 4; i += 1) await store.recordEgress(egressDecision({ at: DAY2 + i, port: 440 + i }));
      await store.recordEgress(egressDecision({ at: DAY2 + 9, method: 'HTTP', host: 'example.com', port: 80, decision: 'refused_host', reason: 'why', agentId: 'agent-1' }));
      const listed = await store.egressOf('caller-a', 'run-1', 2);
      assert.deepEqual(listed, [
        egressDecision({ at: DAY2 + 3, port: 443 }),
        egressDecision({ at: DAY2 + 9, method: 'HTTP', host: 'example.com', port: 80, decision: 'refused_host', reason: 'why', agentId: 'agent-1' }),
      ]);
    });

    it('keeps what a container chose to send as it was sent: a model, a host and reasons with a NUL in them', async () => {
      const request = usageRequest({ model: AWKWARD_TEXT, status: 403, tokens: NO_TOKENS, costUsd: 0, refusal: { limit: 'run', message: AWKWARD_TEXT } });
      const decision = egressDecision({ host: AWKWARD_TEXT, decision: 'refused_host', reason: AWKWARD_TEXT });
      await store.recordRequest(request);
      await store.recordEgress(decision);
      assert.deepEqual(await store.requestsOf('caller-a', 'run-1', 500), [request]);
      assert.deepEqual(await store.egressOf('caller-a', 'run-1', 500), [decision]);
      assert.equal((await store.run('caller-a', 'run-1'))?.refusal, AWKWARD_TEXT);
    });

    it('stores counts a Messages API answer could get wrong as non-negative integers', async () => {
      await store.recordRequest(usageRequest({ tokens: { input_tokens: -5, output_tokens: Number.NaN, cache_creation_input_tokens: 2.6, cache_read_input_tokens: Number.POSITIVE_INFINITY }, costUsd: -1 }));
      assert.deepEqual(await store.callerDay('caller-a', '2026-11-26'), {
        requests: 1, refused: 0, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 3, cache_read_input_tokens: 0 }, costMicroUsd: 0,
      });
    });

    it('keeps costs exact to the micro-dollar however many requests are summed', async () => {
      for (let i = 0; i < 10; i += 1) await store.recordRequest(usageRequest({ costUsd: 0.1 }));
      assert.equal((await store.callerDay('caller-a', '2026-11-26')).costMicroUsd, 1_000_000);
      assert.equal(await store.runCostMicroUsd('run-1'), 1_000_000);
    });

    it('sums beyond 2^31 without overflowing', async () => {
      const huge = { input_tokens: 2_000_000_000, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
      await store.recordRequest(usageRequest({ tokens: huge, costUsd: 3000 }));
      await store.recordRequest(usageRequest({ tokens: huge, costUsd: 3000 }));
      const totals = await store.callerDay('caller-a', '2026-11-26');
      assert.equal(totals.tokens.input_tokens, 4_000_000_000);
      assert.equal(totals.costMicroUsd, 6_000_000_000);
    });

    it('prunes egress decisions made before a moment and answers how many', async () => {
      await store.recordEgress(egressDecision({ at: DAY2 + 1 }));
      await store.recordEgress(egressDecision({ at: DAY2 + 2 }));
      await store.recordEgress(egressDecision({ at: DAY2 + 3 }));
      assert.equal(await store.pruneEgress(DAY2 + 3), 2);
      assert.deepEqual((await store.egressOf('caller-a', 'run-1', 500)).map((decision) => decision.at), [DAY2 + 3]);
      assert.equal(await store.pruneEgress(DAY2 + 3), 0);
    });

    it('prunes egress decisions older than 30 days when it opens, keeps model requests', async () => {
      await store.recordEgress(egressDecision({ at: DAY2 - EGRESS_RETENTION_MS - 1 }));
      await store.recordEgress(egressDecision({ at: DAY2 - EGRESS_RETENTION_MS + 1 }));
      await store.recordRequest(usageRequest({ at: DAY2 - EGRESS_RETENTION_MS - 1 }));
      await reopen();
      assert.equal((await store.egressOf('caller-a', 'run-1', 500)).length, 1);
      assert.equal((await store.requestsOf('caller-a', 'run-1', 500)).length, 1);
    });

    it('keeps what it recorded across a reopen', async () => {
      await store.recordRequest(usageRequest());
      await store.recordEgress(egressDecision());
      await reopen();
      assert.equal((await store.callerDay('caller-a', '2026-11-26')).requests, 1);
      assert.equal((await store.egressOf('caller-a', 'run-1', 500)).length, 1);
    });

    it('counts every one of many requests recorded at once', async () => {
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.recordRequest(usageRequest({ at: DAY2 + i, runId: `run-${i % 5}` }))));
      assert.equal((await store.callerDay('caller-a', '2026-11-26')).requests, 50);
      assert.equal((await store.runs('caller-a', '2026-11-26', '2026-11-26', 500)).length, 5);
    });

    it('refuses work once closed', async () => {
      await store.close();
      await assert.rejects(async () => store.recordRequest(usageRequest()));
      await assert.rejects(async () => store.callerDay('caller-a', '2026-11-26'));
      store = await openers.reopen(() => DAY2);
    });
  });
}
