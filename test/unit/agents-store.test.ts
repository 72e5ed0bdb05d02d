// The agent records a restarted service reads back (src/store/agents): every field as written, progress
// updates, live and exited lists, retention; and a file written before the warm-up column existed reads
// its agents as not warmed up.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { applyMigrations } from '../../src/store/migrate.js';
import type { AgentRecord } from '../../src/store/agents/agent-store.js';
import { SqliteAgentStore } from '../../src/store/agents/sqlite-agent-store.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-agents-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;
const freshPath = () => join(dir, `agents-${(fileCounter += 1)}.db`);

const T0 = '2030-01-01T00:00:00.000Z';
const T1 = '2030-01-01T00:00:01.000Z';

function record(n: number, extra: Partial<AgentRecord> = {}): AgentRecord {
  return {
    id: `agent-${n}`,
    owner: 'client-a',
    sessionId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    runId: `run${n}`,
    inputsId: `inputs${n}`,
    container: `berth-run${n}`,
    workdir: '/workspace',
    persistent: true,
    idleTimeoutSeconds: 600,
    idleTimeoutDisabled: false,
    status: 'idle',
    currentTurn: null,
    turnsCompleted: 0,
    turnsEnded: 0,
    warmUpResults: 0,
    exitError: null,
    createdAt: T0,
    lastActivityAt: T0,
    exitedAt: null,
    ...extra,
  };
}

describe('SqliteAgentStore', () => {
  let store: SqliteAgentStore;
  beforeEach(() => {
    store = new SqliteAgentStore(freshPath());
  });
  afterEach(() => store.close());

  it('reads back every field of a new agent, a pooled engine\'s warm-up included', () => {
    const pooled = record(1, { warmUpResults: 1, persistent: false, idleTimeoutDisabled: true, status: 'generating', currentTurn: 'turn-1' });
    store.insert(pooled);
    store.insert(record(2));
    assert.deepEqual(store.live(), [pooled, record(2)]);
  });

  it('keeps the progress of an agent, and lists it exited once it ended', () => {
    store.insert(record(1, { warmUpResults: 1 }));
    store.update('agent-1', { status: 'exited', currentTurn: null, turnsCompleted: 2, turnsEnded: 3, exitError: 'agent: stopped', lastActivityAt: T1, exitedAt: T1 });
    assert.deepEqual(store.live(), []);
    assert.deepEqual(store.exited(), [record(1, { warmUpResults: 1, status: 'exited', turnsCompleted: 2, turnsEnded: 3, exitError: 'agent: stopped', lastActivityAt: T1, exitedAt: T1 })]);
    assert.equal(store.removeExitedBefore('2030-01-01T00:00:00.500Z'), 0);
    assert.equal(store.removeExitedBefore('2030-01-01T00:00:02.000Z'), 1);
    assert.deepEqual(store.exited(), []);
  });
});

it('agents stored before the warm-up was recorded read as not warmed up', () => {
  // A file as the previous version left it: only the first migration applied, one agent in it.
  const firstOnly = join(dir, 'first-migration');
  mkdirSync(firstOnly);
  cpSync(new URL('../../src/store/agents/migrations/001_create_agents.sql', import.meta.url), join(firstOnly, '001_create_agents.sql'));
  const path = freshPath();
  const old = new Database(path);
  applyMigrations(old, new URL(`file://${firstOnly}/`));
  old.prepare(
    `INSERT INTO agents (id, owner, session_id, run_id, inputs_id, container, workdir, persistent, idle_timeout_seconds, idle_timeout_disabled,
       status, current_turn, turns_completed, turns_ended, exit_error, created_at, last_activity_at, exited_at)
     VALUES ('agent-1', 'client-a', '00000000-0000-4000-8000-000000000001', 'run1', 'inputs1', 'berth-run1', '/workspace', 1, 600, 0,
       'idle', NULL, 0, 0, NULL, '${T0}', '${T0}', NULL)`,
  ).run();
  old.close();
  const store = new SqliteAgentStore(path);
  try {
    assert.deepEqual(store.live(), [record(1)]);
  } finally {
    store.close();
  }
});
