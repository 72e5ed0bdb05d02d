// Agent records on PostgreSQL (issue 26): one table for every node, each node's agents apart. An agent lives
// on one node (its container is on that node's Podman), and a node's start follows again the live agents of
// its records and lists the exited ones: the store is opened for one node and every statement but the id's
// uniqueness names it, so a node never tries to find another's container, nor forgets another's agents.
// Times are timestamptz, written from and read back to the interface's ISO 8601 strings (milliseconds kept).
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { AgentProgress, AgentRecord, AgentStatus, AgentStore } from './agent-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface AgentRow {
  id: string;
  owner: string;
  session_id: string;
  run_id: string;
  inputs_id: string;
  container: string;
  workdir: string;
  persistent: boolean;
  idle_timeout_seconds: number;
  idle_timeout_disabled: boolean;
  status: AgentStatus;
  current_turn: string | null;
  turns_completed: number;
  turns_ended: number;
  warm_up_results: number;
  exit_error: string | null;
  created_at: Date;
  last_activity_at: Date;
  exited_at: Date | null;
}

const COLUMNS = `id, owner, session_id, run_id, inputs_id, container, workdir, persistent, idle_timeout_seconds, idle_timeout_disabled,
  status, current_turn, turns_completed, turns_ended, warm_up_results, exit_error::text AS exit_error, created_at, last_activity_at, exited_at`;

function toRecord(row: AgentRow): AgentRecord {
  return {
    id: row.id,
    owner: row.owner,
    sessionId: row.session_id,
    runId: row.run_id,
    inputsId: row.inputs_id,
    container: row.container,
    workdir: row.workdir,
    persistent: row.persistent,
    idleTimeoutSeconds: row.idle_timeout_seconds,
    idleTimeoutDisabled: row.idle_timeout_disabled,
    status: row.status,
    currentTurn: row.current_turn,
    turnsCompleted: row.turns_completed,
    turnsEnded: row.turns_ended,
    warmUpResults: row.warm_up_results,
    exitError: row.exit_error === null ? null : (JSON.parse(row.exit_error) as string),
    createdAt: row.created_at.toISOString(),
    lastActivityAt: row.last_activity_at.toISOString(),
    exitedAt: row.exited_at === null ? null : row.exited_at.toISOString(),
  };
}

const jsonText = (text: string | null) => (text === null ? null : JSON.stringify(text));

export class PostgresAgentStore implements AgentStore {
  private constructor(
    private readonly db: StoreQueries,
    /** The node whose agents these are (its SERVICE_NODE_NAME). */
    private readonly node: string,
  ) {}

  /** Applies the store's pending migrations to the shared database, then answers the agents of `node`. */
  static async open(database: PostgresDatabase, node: string): Promise<PostgresAgentStore> {
    if (node === '') throw new Error('a PostgreSQL agent store needs the name of the node it is opened for');
    await applyPostgresMigrations(database, 'agents', MIGRATIONS);
    return new PostgresAgentStore(new StoreQueries(database, 'agents'), node);
  }

  async insert(record: AgentRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO agents (id, node, owner, session_id, run_id, inputs_id, container, workdir, persistent, idle_timeout_seconds,
         idle_timeout_disabled, status, current_turn, turns_completed, turns_ended, warm_up_results, exit_error, created_at, last_activity_at, exited_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
      [
        record.id, this.node, record.owner, record.sessionId, record.runId, record.inputsId, record.container, record.workdir,
        record.persistent, record.idleTimeoutSeconds, record.idleTimeoutDisabled, record.status, record.currentTurn,
        record.turnsCompleted, record.turnsEnded, record.warmUpResults, jsonText(record.exitError),
        record.createdAt, record.lastActivityAt, record.exitedAt,
      ],
    );
  }

  async update(id: string, progress: AgentProgress): Promise<void> {
    await this.db.query(
      `UPDATE agents SET status = $3, current_turn = $4, turns_completed = $5, turns_ended = $6, exit_error = $7,
         last_activity_at = $8, exited_at = $9 WHERE node = $1 AND id = $2 AND lost_at IS NULL`,
      [
        this.node, id, progress.status, progress.currentTurn, progress.turnsCompleted, progress.turnsEnded,
        jsonText(progress.exitError), progress.lastActivityAt, progress.exitedAt,
      ],
    );
  }

  async remove(id: string): Promise<void> {
    await this.db.query('DELETE FROM agents WHERE node = $1 AND id = $2', [this.node, id]);
  }

  /**
   * Another node's agents, that node being lost (issue 26, core/cluster/node-loss.ts): every live one becomes
   * exited with `exitError` at `at`, in one statement (of two nodes doing it at once, each agent is moved by
   * one); the lost node's own later writes no longer change them (lost_at). Answers the ids moved.
   */
  async markNodeLost(node: string, exitError: string, at: string): Promise<string[]> {
    const rows = await this.db.query<{ id: string }>(
      `UPDATE agents SET status = 'exited', current_turn = NULL, exit_error = $2, exited_at = $3, last_activity_at = $3, lost_at = $3
       WHERE node = $1 AND status <> 'exited' RETURNING id`,
      [node, jsonText(exitError), at],
    );
    return rows.map((row) => row.id);
  }

  async live(): Promise<AgentRecord[]> {
    const rows = await this.db.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE node = $1 AND status <> 'exited' ORDER BY created_at, id`, [this.node]);
    return rows.map(toRecord);
  }

  async exited(): Promise<AgentRecord[]> {
    const rows = await this.db.query<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE node = $1 AND status = 'exited' ORDER BY created_at, id`, [this.node]);
    return rows.map(toRecord);
  }

  async removeExitedBefore(cutoff: string): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      `WITH gone AS (DELETE FROM agents WHERE node = $1 AND status = 'exited' AND exited_at < $2 RETURNING 1) SELECT count(*) AS n FROM gone`,
      [this.node, cutoff],
    );
    return row!.n;
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}
