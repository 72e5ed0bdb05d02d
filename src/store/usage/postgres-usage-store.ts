// Usage records on PostgreSQL, shared by every node (issue 26): what any node's gateway recorded is what every
// node's GET /usage sums. The queries are the SQLite file's (sqlite-usage-store.ts) in PostgreSQL's words: sums
// of bigint columns are numeric there, so each is cast back to bigint (read as a number by the pool); the texts
// a container can choose are json strings (migrations/postgres/001_create_usage.sql), written with
// JSON.stringify and read back as text to be parsed, so a NUL in them is kept instead of failing the insert.
// Egress decisions are pruned as in the file: at open and hourly as decisions arrive, by whichever node sees
// them; two nodes pruning at once only delete the same rows twice.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import {
  EGRESS_PRUNE_EVERY_MS,
  EGRESS_RETENTION_MS,
  storedCount as count,
  type DayTotals,
  type EgressDecisionRecord,
  type ModelRequestRecord,
  type RunTotals,
  type UsageStore,
  type UsageTotals,
} from './usage-store.js';
import {
  egressRecord, holderValues, requestRecord, runTotals, totals,
  type EgressRow, type RequestRow, type RunRow, type SumsRow,
} from './usage-rows.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

/** The sums every totals query selects, in UsageTotals' order (SUM of a bigint is numeric: cast back). */
const SUMS = `count(*) AS requests,
  count(*) FILTER (WHERE refusal_limit IS NOT NULL) AS refused,
  COALESCE(SUM(input_tokens), 0)::bigint AS input_tokens,
  COALESCE(SUM(output_tokens), 0)::bigint AS output_tokens,
  COALESCE(SUM(cache_creation_input_tokens), 0)::bigint AS cache_creation_input_tokens,
  COALESCE(SUM(cache_read_input_tokens), 0)::bigint AS cache_read_input_tokens,
  COALESCE(SUM(cost_micro_usd), 0)::bigint AS cost_micro_usd`;

/** The latest refusal message of the run `run_id` of `caller` names (a correlated subquery), as JSON text. */
const LATEST_REFUSAL = (runId: string, caller: string) => `(SELECT refusal_message::text FROM model_requests AS r
  WHERE r.run_id = ${runId} AND r.caller = ${caller} AND r.refusal_limit IS NOT NULL ORDER BY r.at DESC, r.id DESC LIMIT 1)`;

const REQUEST_COLUMNS = `id, at, caller, run_id, session_id, agent_id, model::text AS model, status, input_tokens, output_tokens,
  cache_creation_input_tokens, cache_read_input_tokens, cost_micro_usd, refusal_limit, refusal_message::text AS refusal_message, overhead_ms`;

const EGRESS_COLUMNS = 'id, at, caller, run_id, session_id, agent_id, method, host::text AS host, port, decision, reason::text AS reason';

/** A JSON string column read as text: the string, or null for SQL NULL. */
function parsedText(json: string | null): string | null {
  return json === null ? null : (JSON.parse(json) as string);
}

/** A run's row as the queries answer it (its refusal still JSON text), with its refusal read. */
function runRow(row: RunRow): RunRow {
  return { ...row, refusal: parsedText(row.refusal) };
}

export class PostgresUsageStore implements UsageStore {
  private lastPrune = 0;

  private constructor(
    private readonly db: StoreQueries,
    private readonly now: () => number,
  ) {}

  /** Applies the store's pending migrations to the shared database, prunes old egress decisions, answers the store. */
  static async open(database: PostgresDatabase, now: () => number = Date.now): Promise<PostgresUsageStore> {
    await applyPostgresMigrations(database, 'usage', MIGRATIONS);
    const store = new PostgresUsageStore(new StoreQueries(database, 'usage'), now);
    await store.pruneDue();
    return store;
  }

  async recordRequest(entry: ModelRequestRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO model_requests (at, day, caller, run_id, session_id, agent_id, model, status, input_tokens, output_tokens,
         cache_creation_input_tokens, cache_read_input_tokens, cost_micro_usd, refusal_limit, refusal_message, overhead_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
      [
        ...holderValues(entry), JSON.stringify(entry.model), entry.status,
        count(entry.tokens.input_tokens), count(entry.tokens.output_tokens), count(entry.tokens.cache_creation_input_tokens),
        count(entry.tokens.cache_read_input_tokens), count(entry.costUsd * 1e6),
        entry.refusal?.limit ?? null, entry.refusal === undefined ? null : JSON.stringify(entry.refusal.message), entry.overheadMs ?? null,
      ],
    );
  }

  async recordEgress(entry: EgressDecisionRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO egress_decisions (at, day, caller, run_id, session_id, agent_id, method, host, port, decision, reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        ...holderValues(entry), entry.method, JSON.stringify(entry.host), entry.port, entry.decision,
        entry.reason === undefined ? null : JSON.stringify(entry.reason),
      ],
    );
    await this.pruneDue();
  }

  async callerDay(caller: string, day: string): Promise<UsageTotals> {
    const [row] = await this.db.query<SumsRow>(`SELECT ${SUMS} FROM model_requests WHERE caller = $1 AND day = $2`, [caller, day]);
    return totals(row!);
  }

  async callersOn(day: string): Promise<Map<string, UsageTotals>> {
    const rows = await this.db.query<SumsRow & { caller: string }>(`SELECT caller, ${SUMS} FROM model_requests WHERE day = $1 GROUP BY caller`, [day]);
    return new Map(rows.map((row) => [row.caller, totals(row)]));
  }

  async runCostMicroUsd(runId: string): Promise<number> {
    const [row] = await this.db.query<{ cost: number }>('SELECT COALESCE(SUM(cost_micro_usd), 0)::bigint AS cost FROM model_requests WHERE run_id = $1', [runId]);
    return row!.cost;
  }

  async days(caller: string, from: string, to: string): Promise<DayTotals[]> {
    const rows = await this.db.query<SumsRow & { day: string }>(
      `SELECT day, ${SUMS} FROM model_requests WHERE caller = $1 AND day BETWEEN $2 AND $3 GROUP BY day ORDER BY day`,
      [caller, from, to],
    );
    return rows.map((row) => ({ day: row.day, ...totals(row) }));
  }

  async runs(caller: string, from: string, to: string, limit: number): Promise<RunTotals[]> {
    const rows = await this.db.query<RunRow>(
      `SELECT run_id, caller, MAX(session_id) AS session_id, MAX(agent_id) AS agent_id, MIN(at) AS first_at, MAX(at) AS last_at, ${SUMS},
         ${LATEST_REFUSAL('m.run_id', 'm.caller')} AS refusal
       FROM model_requests AS m WHERE caller = $1 AND day BETWEEN $2 AND $3 GROUP BY run_id, caller ORDER BY last_at DESC, run_id LIMIT $4`,
      [caller, from, to, limit],
    );
    return rows.map((row) => runTotals(runRow(row)));
  }

  async run(caller: string, runId: string): Promise<RunTotals | undefined> {
    // Both halves in one statement: one snapshot, so a request recorded meanwhile is counted in both or neither.
    const [row] = await this.db.query<RunRow & { egress_first_at: number | null; egress_last_at: number | null; egress_session_id: string | null; egress_agent_id: string | null }>(
      `WITH requests AS (
         SELECT MAX(session_id) AS session_id, MAX(agent_id) AS agent_id, MIN(at) AS first_at, MAX(at) AS last_at, ${SUMS},
           ${LATEST_REFUSAL('$1', '$2')} AS refusal
         FROM model_requests WHERE run_id = $1 AND caller = $2
       ), egress AS (
         SELECT MIN(at) AS egress_first_at, MAX(at) AS egress_last_at, MAX(session_id) AS egress_session_id, MAX(agent_id) AS egress_agent_id
         FROM egress_decisions WHERE run_id = $1 AND caller = $2
       )
       SELECT $1::text AS run_id, $2::text AS caller, requests.*, egress.* FROM requests, egress`,
      [runId, caller],
    );
    if (!row || (row.requests === 0 && row.egress_first_at === null)) return undefined;
    return runTotals(runRow({
      ...row,
      session_id: row.session_id ?? row.egress_session_id,
      agent_id: row.agent_id ?? row.egress_agent_id,
      first_at: Math.min(row.first_at ?? Infinity, row.egress_first_at ?? Infinity),
      last_at: Math.max(row.last_at ?? -Infinity, row.egress_last_at ?? -Infinity),
    }));
  }

  async requestsOf(caller: string, runId: string, limit: number): Promise<ModelRequestRecord[]> {
    const rows = await this.db.query<RequestRow>(
      `SELECT * FROM (SELECT ${REQUEST_COLUMNS} FROM model_requests WHERE run_id = $1 AND caller = $2 ORDER BY at DESC, id DESC LIMIT $3) AS latest
       ORDER BY at, id`,
      [runId, caller, limit],
    );
    return rows.map((row) => requestRecord({ ...row, model: parsedText(row.model)!, refusal_message: parsedText(row.refusal_message) }));
  }

  async egressOf(caller: string, runId: string, limit: number): Promise<EgressDecisionRecord[]> {
    const rows = await this.db.query<EgressRow>(
      `SELECT * FROM (SELECT ${EGRESS_COLUMNS} FROM egress_decisions WHERE run_id = $1 AND caller = $2 ORDER BY at DESC, id DESC LIMIT $3) AS latest
       ORDER BY at, id`,
      [runId, caller, limit],
    );
    return rows.map((row) => egressRecord({ ...row, host: parsedText(row.host)!, reason: parsedText(row.reason) }));
  }

  async pruneEgress(before: number): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      'WITH gone AS (DELETE FROM egress_decisions WHERE at < $1 RETURNING 1) SELECT count(*) AS n FROM gone',
      [before],
    );
    return row!.n;
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }

  private async pruneDue(): Promise<void> {
    const now = this.now();
    if (now - this.lastPrune < EGRESS_PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    await this.pruneEgress(now - EGRESS_RETENTION_MS);
  }
}
