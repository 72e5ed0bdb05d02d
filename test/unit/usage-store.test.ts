// The usage store: what the gateway records is summed per caller and UTC day and per run, only the caller's
// own records are answered, and egress decisions expire after 30 days.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { EGRESS_RETENTION_MS, SqliteUsageStore } from '../../src/store/usage/sqlite-usage-store.js';
import type { EgressDecisionRecord, ModelRequestRecord } from '../../src/store/usage/usage-store.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-usage-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

const DAY1 = Date.parse('2026-11-25T23:59:59.999Z');
const DAY2 = Date.parse('2026-11-26T00:00:00.000Z');

function request(extra: Partial<ModelRequestRecord> = {}): ModelRequestRecord {
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

function egress(extra: Partial<EgressDecisionRecord> = {}): EgressDecisionRecord {
  return { at: DAY2 + 2000, caller: 'caller-a', runId: 'run-1', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed', ...extra };
}

describe('SqliteUsageStore', () => {
  let path: string;
  let store: SqliteUsageStore;
  beforeEach(() => {
    path = join(dir, `usage-${(counter += 1)}.db`);
    store = new SqliteUsageStore(path, () => DAY2);
  });
  afterEach(() => store.close());

  it('opens its file with synchronous=NORMAL and WAL (no fsync per model request)', () => {
    const db = new Database(path);
    try {
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    } finally {
      db.close();
    }
    // The pragma is per connection: read it from the store's own.
    const own = (store as unknown as { db: Database.Database }).db;
    assert.equal(own.pragma('synchronous', { simple: true }), 1); // 1 = NORMAL, 2 = FULL
  });

  it('sums a caller\'s requests per UTC day, a request at 23:59:59.999 on the day before', () => {
    store.recordRequest(request({ at: DAY1 }));
    store.recordRequest(request());
    store.recordRequest(request({ costUsd: 0.000001, tokens: { input_tokens: 1, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } }));
    store.recordRequest(request({ caller: 'caller-b' }));
    const days = store.days('caller-a', '2026-11-25', '2026-11-26');
    assert.deepEqual(days.map((day) => [day.day, day.requests, day.tokens.input_tokens, day.costMicroUsd]), [
      ['2026-11-25', 1, 100, 484],
      ['2026-11-26', 2, 101, 485],
    ]);
    assert.equal(store.callerDay('caller-a', '2026-11-26').costMicroUsd, 485);
    assert.equal(store.callerDay('caller-a', '2026-11-27').requests, 0);
    assert.deepEqual([...store.callersOn('2026-11-26').keys()].sort(), ['caller-a', 'caller-b']);
  });

  it('counts refused requests apart and keeps the latest refusal of a run', () => {
    store.recordRequest(request());
    store.recordRequest(request({ at: DAY2 + 5000, status: 403, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, costUsd: 0, refusal: { limit: 'run', message: 'first' } }));
    store.recordRequest(request({ at: DAY2 + 6000, status: 403, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, costUsd: 0, refusal: { limit: 'run', message: 'second' } }));
    const run = store.run('caller-a', 'run-1');
    assert.equal(run?.requests, 3);
    assert.equal(run?.refused, 2);
    assert.equal(run?.refusal, 'second');
    assert.equal(store.runs('caller-a', '2026-11-26', '2026-11-26', 500)[0]?.refusal, 'second');
    assert.equal(store.runCostMicroUsd('run-1'), 484);
  });

  it('answers only the caller\'s own runs, requests and egress decisions', () => {
    store.recordRequest(request());
    store.recordEgress(egress());
    assert.equal(store.run('caller-b', 'run-1'), undefined);
    assert.deepEqual(store.requestsOf('caller-b', 'run-1', 500), []);
    assert.deepEqual(store.egressOf('caller-b', 'run-1', 500), []);
    assert.deepEqual(store.runs('caller-b', '2026-11-26', '2026-11-26', 500), []);
    assert.equal(store.requestsOf('caller-a', 'run-1', 500).length, 1);
    assert.equal(store.egressOf('caller-a', 'run-1', 500).length, 1);
  });

  it('finds a run that only made egress decisions (a workspace clone)', () => {
    store.recordEgress(egress({ runId: 'clone-1', decision: 'refused_host', reason: 'not on the list' }));
    const run = store.run('caller-a', 'clone-1');
    assert.equal(run?.requests, 0);
    assert.equal(run?.firstAt, DAY2 + 2000);
    assert.equal(store.run('caller-a', 'run-unknown'), undefined);
  });

  it('lists runs latest first, limited, with their session and agent', () => {
    store.recordRequest(request({ runId: 'run-old', at: DAY2 + 1 }));
    store.recordRequest(request({ runId: 'run-agent', agentId: 'agent-1', at: DAY2 + 3 }));
    store.recordRequest(request({ runId: 'run-mid', at: DAY2 + 2 }));
    const runs = store.runs('caller-a', '2026-11-26', '2026-11-26', 2);
    assert.deepEqual(runs.map((run) => run.runId), ['run-agent', 'run-mid']);
    assert.equal(runs[0]?.agentId, 'agent-1');
    assert.equal(runs[0]?.sessionId, 'session-1');
  });

  it('answers the latest requests of a run, oldest first, with every field it recorded', () => {
    for (let i = 0; i < 5; i += 1) store.recordRequest(request({ at: DAY2 + i }));
    const listed = store.requestsOf('caller-a', 'run-1', 3);
    assert.deepEqual(listed.map((entry) => entry.at), [DAY2 + 2, DAY2 + 3, DAY2 + 4]);
    assert.deepEqual(listed[0], request({ at: DAY2 + 2 }));
  });

  it('keeps costs exact to the micro-dollar however many requests are summed', () => {
    for (let i = 0; i < 10; i += 1) store.recordRequest(request({ costUsd: 0.1 }));
    assert.equal(store.callerDay('caller-a', '2026-11-26').costMicroUsd, 1_000_000);
  });

  it('prunes egress decisions older than 30 days when it opens, keeps model requests', () => {
    store.recordEgress(egress({ at: DAY2 - EGRESS_RETENTION_MS - 1 }));
    store.recordEgress(egress({ at: DAY2 - EGRESS_RETENTION_MS + 1 }));
    store.recordRequest(request({ at: DAY2 - EGRESS_RETENTION_MS - 1 }));
    store.close();
    store = new SqliteUsageStore(path, () => DAY2);
    assert.equal(store.egressOf('caller-a', 'run-1', 500).length, 1);
    assert.equal(store.requestsOf('caller-a', 'run-1', 500).length, 1);
  });

  it('keeps what it recorded across a reopen', () => {
    store.recordRequest(request());
    store.close();
    store = new SqliteUsageStore(path, () => DAY2);
    assert.equal(store.callerDay('caller-a', '2026-11-26').requests, 1);
  });
});
