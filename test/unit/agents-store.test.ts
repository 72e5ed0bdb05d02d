// The AgentStore contract (test/support/agent-store-contract.ts) on the SQLite file, and what only the file
// promises: one written before the warm-up column existed reads its agents as not warmed up. The PostgreSQL
// run of the same contract is in postgres-stores.test.ts.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import Database from 'better-sqlite3';
import { applyMigrations } from '../../src/store/migrate.js';
import { SqliteAgentStore } from '../../src/store/agents/sqlite-agent-store.js';
import { T0, agentRecord, agentStoreContract } from '../support/agent-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-agents-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;
const freshPath = () => join(dir, `agents-${(fileCounter += 1)}.db`);

let lastPath = '';
agentStoreContract('sqlite file', {
  open: () => new SqliteAgentStore((lastPath = freshPath())),
  reopen: () => new SqliteAgentStore(lastPath),
});

it('agents stored before the warm-up was recorded read as not warmed up', async () => {
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
    assert.deepEqual(await store.live(), [agentRecord(1)]);
  } finally {
    await store.close();
  }
});
