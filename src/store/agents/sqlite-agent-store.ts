// Agent records in one SQLite file (<SERVICE_DATA_DIR>/agents.db), WAL with full fsync like the job store.
// Writes are small and synchronous (better-sqlite3): one per status change of an agent. Its answers are
// promises (the PostgreSQL store's interface) settled at once: the work is done when a call returns.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import type { AgentProgress, AgentRecord, AgentStatus, AgentStore } from './agent-store.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

interface AgentRow {
  id: string;
  owner: string;
  session_id: string;
  run_id: string;
  inputs_id: string;
  container: string;
  workdir: string;
  persistent: number;
  idle_timeout_seconds: number;
  idle_timeout_disabled: number;
  status: AgentStatus;
  current_turn: string | null;
  turns_completed: number;
  turns_ended: number;
  warm_up_results: number;
  exit_error: string | null;
  created_at: string;
  last_activity_at: string;
  exited_at: string | null;
}

function toRecord(row: AgentRow): AgentRecord {
  return {
    id: row.id,
    owner: row.owner,
    sessionId: row.session_id,
    runId: row.run_id,
    inputsId: row.inputs_id,
    container: row.container,
    workdir: row.workdir,
    persistent: row.persistent === 1,
    idleTimeoutSeconds: row.idle_timeout_seconds,
    idleTimeoutDisabled: row.idle_timeout_disabled === 1,
    status: row.status,
    currentTurn: row.current_turn,
    turnsCompleted: row.turns_completed,
    turnsEnded: row.turns_ended,
    warmUpResults: row.warm_up_results,
    exitError: row.exit_error,
    createdAt: row.created_at,
    lastActivityAt: row.last_activity_at,
    exitedAt: row.exited_at,
  };
}

export class SqliteAgentStore implements AgentStore {
  private readonly db: Database.Database;

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS);
  }

  async insert(record: AgentRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO agents (id, owner, session_id, run_id, inputs_id, container, workdir, persistent, idle_timeout_seconds,
           idle_timeout_disabled, status, current_turn, turns_completed, turns_ended, warm_up_results, exit_error, created_at, last_activity_at, exited_at)
         VALUES (@id, @owner, @sessionId, @runId, @inputsId, @container, @workdir, @persistent, @idleTimeoutSeconds,
           @idleTimeoutDisabled, @status, @currentTurn, @turnsCompleted, @turnsEnded, @warmUpResults, @exitError, @createdAt, @lastActivityAt, @exitedAt)`,
      )
      .run({ ...record, persistent: record.persistent ? 1 : 0, idleTimeoutDisabled: record.idleTimeoutDisabled ? 1 : 0 });
  }

  async update(id: string, progress: AgentProgress): Promise<void> {
    this.db
      .prepare(
        `UPDATE agents SET status = @status, current_turn = @currentTurn, turns_completed = @turnsCompleted, turns_ended = @turnsEnded,
           exit_error = @exitError, last_activity_at = @lastActivityAt, exited_at = @exitedAt WHERE id = @id`,
      )
      .run({ id, ...progress });
  }

  async remove(id: string): Promise<void> {
    this.db.prepare('DELETE FROM agents WHERE id = ?').run(id);
  }

  async live(): Promise<AgentRecord[]> {
    return (this.db.prepare(`SELECT * FROM agents WHERE status <> 'exited' ORDER BY created_at, id`).all() as AgentRow[]).map(toRecord);
  }

  async exited(): Promise<AgentRecord[]> {
    return (this.db.prepare(`SELECT * FROM agents WHERE status = 'exited' ORDER BY created_at, id`).all() as AgentRow[]).map(toRecord);
  }

  async removeExitedBefore(cutoff: string): Promise<number> {
    return this.db.prepare(`DELETE FROM agents WHERE status = 'exited' AND exited_at < ?`).run(cutoff).changes;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
