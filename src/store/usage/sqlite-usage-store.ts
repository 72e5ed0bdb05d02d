// Usage records in one SQLite file (<SERVICE_DATA_DIR>/usage.db). Unlike the other stores it runs with
// synchronous=NORMAL: a row is written for every model request, inside the gateway's request path, and an
// fsync per row would cost more than the gateway's whole overhead budget; WAL keeps the file consistent,
// a power loss can only drop the last records. Egress decisions are kept for 30 days (pruned at open and
// hourly as decisions arrive); model requests are the accounting and are kept.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import {
  utcDay,
  type BudgetLimit,
  type DayTotals,
  type EgressDecision,
  type EgressDecisionRecord,
  type ModelRequestRecord,
  type RunTotals,
  type TokenCounts,
  type UsageStore,
  type UsageTotals,
} from './usage-store.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);
const DAY_MS = 24 * 60 * 60 * 1000;
export const EGRESS_RETENTION_MS = 30 * DAY_MS;
const PRUNE_EVERY_MS = 60 * 60 * 1000;

/** The sums every totals query selects, in UsageTotals' order. */
const SUMS = `COUNT(*) AS requests,
  COALESCE(SUM(refusal_limit IS NOT NULL), 0) AS refused,
  COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens,
  COALESCE(SUM(cache_creation_input_tokens), 0) AS cache_creation_input_tokens,
  COALESCE(SUM(cache_read_input_tokens), 0) AS cache_read_input_tokens,
  COALESCE(SUM(cost_micro_usd), 0) AS cost_micro_usd`;

/** The four token columns every request row and every sum has. */
interface TokenColumns {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

/** Whose a row is: the columns of RecordHolder. */
interface HolderColumns {
  caller: string;
  run_id: string;
  session_id: string | null;
  agent_id: string | null;
}

interface SumsRow extends TokenColumns {
  requests: number;
  refused: number;
  cost_micro_usd: number;
}

interface RunRow extends SumsRow, HolderColumns {
  first_at: number;
  last_at: number;
  refusal: string | null;
}

interface RequestRow extends TokenColumns, HolderColumns {
  at: number;
  model: string;
  status: number;
  cost_micro_usd: number;
  refusal_limit: BudgetLimit | null;
  refusal_message: string | null;
  overhead_ms: number | null;
}

interface EgressRow extends HolderColumns {
  at: number;
  method: 'CONNECT' | 'HTTP';
  host: string;
  port: number;
  decision: EgressDecision;
  reason: string | null;
}

function tokensOf(row: TokenColumns): TokenCounts {
  return {
    input_tokens: row.input_tokens,
    output_tokens: row.output_tokens,
    cache_creation_input_tokens: row.cache_creation_input_tokens,
    cache_read_input_tokens: row.cache_read_input_tokens,
  };
}

/** The holder of a row, its session and agent left out where none was recorded. */
function holderOf(row: HolderColumns): { caller: string; runId: string; sessionId?: string; agentId?: string } {
  return {
    caller: row.caller,
    runId: row.run_id,
    ...(row.session_id !== null ? { sessionId: row.session_id } : {}),
    ...(row.agent_id !== null ? { agentId: row.agent_id } : {}),
  };
}

/** The first columns of every record's row, in the order the INSERTs name them: at, day, caller, run_id, session_id, agent_id. */
function holderValues(record: ModelRequestRecord | EgressDecisionRecord): [number, string, string, string, string | null, string | null] {
  return [record.at, utcDay(record.at), record.caller, record.runId, record.sessionId ?? null, record.agentId ?? null];
}

function totals(row: SumsRow): UsageTotals {
  return { requests: row.requests, refused: row.refused, tokens: tokensOf(row), costMicroUsd: row.cost_micro_usd };
}

function runTotals(row: RunRow): RunTotals {
  return {
    ...totals(row),
    ...holderOf(row),
    firstAt: row.first_at,
    lastAt: row.last_at,
    ...(row.refusal !== null ? { refusal: row.refusal } : {}),
  };
}

function requestRecord(row: RequestRow): ModelRequestRecord {
  return {
    at: row.at,
    ...holderOf(row),
    model: row.model,
    tokens: tokensOf(row),
    costUsd: row.cost_micro_usd / 1e6,
    status: row.status,
    ...(row.refusal_limit !== null ? { refusal: { limit: row.refusal_limit, message: row.refusal_message ?? '' } } : {}),
    ...(row.overhead_ms !== null ? { overheadMs: row.overhead_ms } : {}),
  };
}

function egressRecord(row: EgressRow): EgressDecisionRecord {
  return {
    at: row.at,
    ...holderOf(row),
    method: row.method,
    host: row.host,
    port: row.port,
    decision: row.decision,
    ...(row.reason !== null ? { reason: row.reason } : {}),
  };
}

/** A count that must be a non-negative integer in a row (a Messages API answer could carry anything). */
function count(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.round(value) : 0;
}

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

  recordRequest(entry: ModelRequestRecord): void {
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

  recordEgress(entry: EgressDecisionRecord): void {
    this.statement(
      `INSERT INTO egress_decisions (at, day, caller, run_id, session_id, agent_id, method, host, port, decision, reason)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      ...holderValues(entry), entry.method, entry.host, entry.port, entry.decision, entry.reason ?? null,
    );
    this.pruneDue();
  }

  callerDay(caller: string, day: string): UsageTotals {
    return totals(this.statement(`SELECT ${SUMS} FROM model_requests WHERE caller = ? AND day = ?`).get(caller, day) as SumsRow);
  }

  callersOn(day: string): Map<string, UsageTotals> {
    const rows = this.statement(`SELECT caller, ${SUMS} FROM model_requests WHERE day = ? GROUP BY caller`).all(day) as (SumsRow & { caller: string })[];
    return new Map(rows.map((row) => [row.caller, totals(row)]));
  }

  runCostMicroUsd(runId: string): number {
    return (this.statement('SELECT COALESCE(SUM(cost_micro_usd), 0) AS cost FROM model_requests WHERE run_id = ?').get(runId) as { cost: number }).cost;
  }

  days(caller: string, from: string, to: string): DayTotals[] {
    const rows = this.statement(`SELECT day, ${SUMS} FROM model_requests WHERE caller = ? AND day BETWEEN ? AND ? GROUP BY day ORDER BY day`).all(caller, from, to) as (SumsRow & { day: string })[];
    return rows.map((row) => ({ day: row.day, ...totals(row) }));
  }

  runs(caller: string, from: string, to: string, limit: number): RunTotals[] {
    const rows = this.statement(
      `SELECT run_id, caller, MAX(session_id) AS session_id, MAX(agent_id) AS agent_id, MIN(at) AS first_at, MAX(at) AS last_at, ${SUMS},
         (SELECT refusal_message FROM model_requests AS r WHERE r.run_id = m.run_id AND r.caller = m.caller AND r.refusal_limit IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1) AS refusal
       FROM model_requests AS m WHERE caller = ? AND day BETWEEN ? AND ? GROUP BY run_id ORDER BY last_at DESC, run_id LIMIT ?`,
    ).all(caller, from, to, limit) as RunRow[];
    return rows.map(runTotals);
  }

  run(caller: string, runId: string): RunTotals | undefined {
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

  requestsOf(caller: string, runId: string, limit: number): ModelRequestRecord[] {
    const rows = this.statement(
      `SELECT * FROM (SELECT id, at, caller, run_id, session_id, agent_id, model, status, input_tokens, output_tokens, cache_creation_input_tokens,
         cache_read_input_tokens, cost_micro_usd, refusal_limit, refusal_message, overhead_ms
       FROM model_requests WHERE run_id = ? AND caller = ? ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id`,
    ).all(runId, caller, limit) as RequestRow[];
    return rows.map(requestRecord);
  }

  egressOf(caller: string, runId: string, limit: number): EgressDecisionRecord[] {
    const rows = this.statement(
      `SELECT * FROM (SELECT id, at, caller, run_id, session_id, agent_id, method, host, port, decision, reason
       FROM egress_decisions WHERE run_id = ? AND caller = ? ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id`,
    ).all(runId, caller, limit) as EgressRow[];
    return rows.map(egressRecord);
  }

  pruneEgress(before: number): number {
    return this.statement('DELETE FROM egress_decisions WHERE at < ?').run(before).changes;
  }

  close(): void {
    this.db.close();
  }

  private pruneDue(): void {
    const now = this.now();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    this.pruneEgress(now - EGRESS_RETENTION_MS);
  }
}

