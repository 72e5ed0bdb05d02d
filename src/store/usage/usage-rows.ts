// The rows both usage backends read (store/usage/migrations/), as records: one mapping, so the SQLite file
// and PostgreSQL answer the same records for the same rows.
import {
  utcDay,
  type BudgetLimit,
  type EgressDecision,
  type EgressDecisionRecord,
  type ModelRequestRecord,
  type RunTotals,
  type TokenCounts,
  type UsageTotals,
} from './usage-store.js';

/** The four token columns every request row and every sum has. */
export interface TokenColumns {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

/** Whose a row is: the columns of RecordHolder. */
export interface HolderColumns {
  caller: string;
  run_id: string;
  session_id: string | null;
  agent_id: string | null;
}

export interface SumsRow extends TokenColumns {
  requests: number;
  refused: number;
  cost_micro_usd: number;
}

export interface RunRow extends SumsRow, HolderColumns {
  first_at: number;
  last_at: number;
  refusal: string | null;
}

export interface RequestRow extends TokenColumns, HolderColumns {
  at: number;
  model: string;
  status: number;
  cost_micro_usd: number;
  refusal_limit: BudgetLimit | null;
  refusal_message: string | null;
  overhead_ms: number | null;
}

export interface EgressRow extends HolderColumns {
  at: number;
  method: 'CONNECT' | 'HTTP';
  host: string;
  port: number;
  decision: EgressDecision;
  reason: string | null;
}

export function tokensOf(row: TokenColumns): TokenCounts {
  return {
    input_tokens: row.input_tokens,
    output_tokens: row.output_tokens,
    cache_creation_input_tokens: row.cache_creation_input_tokens,
    cache_read_input_tokens: row.cache_read_input_tokens,
  };
}

/** The holder of a row, its session and agent left out where none was recorded. */
export function holderOf(row: HolderColumns): { caller: string; runId: string; sessionId?: string; agentId?: string } {
  return {
    caller: row.caller,
    runId: row.run_id,
    ...(row.session_id !== null ? { sessionId: row.session_id } : {}),
    ...(row.agent_id !== null ? { agentId: row.agent_id } : {}),
  };
}

/** The first columns of every record's row, in the order the INSERTs name them: at, day, caller, run_id, session_id, agent_id. */
export function holderValues(record: ModelRequestRecord | EgressDecisionRecord): [number, string, string, string, string | null, string | null] {
  return [record.at, utcDay(record.at), record.caller, record.runId, record.sessionId ?? null, record.agentId ?? null];
}

export function totals(row: SumsRow): UsageTotals {
  return { requests: row.requests, refused: row.refused, tokens: tokensOf(row), costMicroUsd: row.cost_micro_usd };
}

export function runTotals(row: RunRow): RunTotals {
  return {
    ...totals(row),
    ...holderOf(row),
    firstAt: row.first_at,
    lastAt: row.last_at,
    ...(row.refusal !== null ? { refusal: row.refusal } : {}),
  };
}

export function requestRecord(row: RequestRow): ModelRequestRecord {
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

export function egressRecord(row: EgressRow): EgressDecisionRecord {
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
