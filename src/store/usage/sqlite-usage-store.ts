// Usage records in one SQLite file (<SERVICE_DATA_DIR>/usage.db). Unlike the other stores it runs with
// synchronous=NORMAL: a row is written for every model request, inside the gateway's request path, and an
// fsync per row would cost more than the gateway's whole overhead budget; WAL keeps the file consistent,
// a power loss can only drop the last records. Egress decisions are kept for 30 days (pruned at open and
// hourly as decisions arrive); model requests are the accounting and are kept. Its answers are promises (the
// UsageStore of PostgreSQL needs them) settled at once: better-sqlite3 has done the work when the call returns.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
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

const MIGRATIONS = new URL('./migrations/', import.meta.url);

/** The sums every totals query selects, in UsageTotals' order. */
const SUMS = `COUNT(*) AS requests,
  COALESCE(SUM(refusal_limit IS NOT NULL), 0) AS refused,
  COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens,
  COALESCE(SUM(cache_creation_input_tokens), 0) AS cache_creation_input_tokens,
  COALESCE(SUM(cache_read_input_tokens), 0) AS cache_read_input_tokens,
  COALESCE(SUM(cost_micro_usd), 0) AS cost_micro_usd`;

export class SqliteUsageStore implements UsageStore {
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  private lastPrune = 0;

  constructor(
    path: string,
    private readonly now: () => number = Date.now,
  ) {
    this.db = openDatabase(path, MIGRATIONS, { synchronous: 'NORMAL' });
    this.pruneDue();
  }

  private statement(sql: string): Database.Statement {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      prepared = this.db.prepare(sql);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }

  async recordRequest(entry: ModelRequestRecord): Promise<void> {
    this.statement(
      `INSERT INTO model_requests (at, day, caller, run_id, session_id, agent_id, model, status, input_tokens, output_tokens,
         cache_creation_input_tokens, cache_read_input_tokens, cost_micro_usd, refusal_limit, refusal_message, overhead_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      ...holderValues(entry), entry.model, entry.status,
      count(entry.tokens.input_tokens), count(entry.tokens.output_tokens), count(entry.tokens.cache_creation_input_tokens),
      count(entry.tokens.cache_read_input_tokens), count(entry.costUsd * 1e6),
      entry.refusal?.limit ?? null, entry.refusal?.message ?? null, entry.overheadMs ?? null,
    );
  }

  async recordEgress(entry: EgressDecisionRecord): Promise<void> {
    this.statement(
      `INSERT INTO egress_decisions (at, day, caller, run_id, session_id, agent_id, method, host, port, decision, reason)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      ...holderValues(entry), entry.method, entry.host, entry.port, entry.decision, entry.reason ?? null,
    );
    this.pruneDue();
  }

  async callerDay(caller: string, day: string): Promise<UsageTotals> {
    return totals(this.statement(`SELECT ${SUMS} FROM model_requests WHERE caller = ? AND day = ?`).get(caller, day) as SumsRow);
  }

  async callersOn(day: string): Promise<Map<string, UsageTotals>> {
    const rows = this.statement(`SELECT caller, ${SUMS} FROM model_requests WHERE day = ? GROUP BY caller`).all(day) as (SumsRow & { caller: string })[];
    return new Map(rows.map((row) => [row.caller, totals(row)]));
  }

  async runCostMicroUsd(runId: string): Promise<number> {
    return (this.statement('SELECT COALESCE(SUM(cost_micro_usd), 0) AS cost FROM model_requests WHERE run_id = ?').get(runId) as { cost: number }).cost;
  }

  async days(caller: string, from: string, to: string): Promise<DayTotals[]> {
    const rows = this.statement(`SELECT day, ${SUMS} FROM model_requests WHERE caller = ? AND day BETWEEN ? AND ? GROUP BY day ORDER BY day`).all(caller, from, to) as (SumsRow & { day: string })[];
    return rows.map((row) => ({ day: row.day, ...totals(row) }));
  }

  async runs(caller: string, from: string, to: string, limit: number): Promise<RunTotals[]> {
    const rows = this.statement(
      `SELECT run_id, caller, MAX(session_id) AS session_id, MAX(agent_id) AS agent_id, MIN(at) AS first_at, MAX(at) AS last_at, ${SUMS},
         (SELECT refusal_message FROM model_requests AS r WHERE r.run_id = m.run_id AND r.caller = m.caller AND r.refusal_limit IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1) AS refusal
       FROM model_requests AS m WHERE caller = ? AND day BETWEEN ? AND ? GROUP BY run_id ORDER BY last_at DESC, run_id LIMIT ?`,
    ).all(caller, from, to, limit) as RunRow[];
    return rows.map(runTotals);
  }

  async run(caller: string, runId: string): Promise<RunTotals | undefined> {
    const row = this.statement(
      `SELECT @runId AS run_id, @caller AS caller, MAX(session_id) AS session_id, MAX(agent_id) AS agent_id, MIN(at) AS first_at, MAX(at) AS last_at, ${SUMS},
         (SELECT refusal_message FROM model_requests WHERE run_id = @runId AND caller = @caller AND refusal_limit IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1) AS refusal
       FROM model_requests WHERE run_id = @runId AND caller = @caller`,
    ).get({ runId, caller }) as RunRow;
    const egress = this.statement(
      'SELECT MIN(at) AS first_at, MAX(at) AS last_at, MAX(session_id) AS session_id, MAX(agent_id) AS agent_id FROM egress_decisions WHERE run_id = ? AND caller = ?',
    ).get(runId, caller) as { first_at: number | null; last_at: number | null; session_id: string | null; agent_id: string | null };
    if (row.requests === 0 && egress.first_at === null) return undefined;
    return runTotals({
      ...row,
      session_id: row.session_id ?? egress.session_id,
      agent_id: row.agent_id ?? egress.agent_id,
      first_at: Math.min(row.first_at ?? Infinity, egress.first_at ?? Infinity),
      last_at: Math.max(row.last_at ?? -Infinity, egress.last_at ?? -Infinity),
    });
  }

  async requestsOf(caller: string, runId: string, limit: number): Promise<ModelRequestRecord[]> {
    const rows = this.statement(
      `SELECT * FROM (SELECT id, at, caller, run_id, session_id, agent_id, model, status, input_tokens, output_tokens, cache_creation_input_tokens,
         cache_read_input_tokens, cost_micro_usd, refusal_limit, refusal_message, overhead_ms
       FROM model_requests WHERE run_id = ? AND caller = ? ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id`,
    ).all(runId, caller, limit) as RequestRow[];
    return rows.map(requestRecord);
  }

  async egressOf(caller: string, runId: string, limit: number): Promise<EgressDecisionRecord[]> {
    const rows = this.statement(
      `SELECT * FROM (SELECT id, at, caller, run_id, session_id, agent_id, method, host, port, decision, reason
       FROM egress_decisions WHERE run_id = ? AND caller = ? ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id`,
    ).all(runId, caller, limit) as EgressRow[];
    return rows.map(egressRecord);
  }

  async pruneEgress(before: number): Promise<number> {
    return this.deleteEgressBefore(before);
  }

  async close(): Promise<void> {
    this.db.close();
  }

  private pruneDue(): void {
    const now = this.now();
    if (now - this.lastPrune < EGRESS_PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    this.deleteEgressBefore(now - EGRESS_RETENTION_MS);
  }

  private deleteEgressBefore(before: number): number {
    return this.statement('DELETE FROM egress_decisions WHERE at < ?').run(before).changes;
  }
}

