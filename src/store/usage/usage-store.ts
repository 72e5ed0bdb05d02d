// What the model gateway and the egress proxy saw, behind a small interface: one record per model request
// (tokens, cost, the status the engine got, a budget refusal) and per egress decision, and the sums that
// budgets (core/gateway/budgets.ts) and GET /usage (core/gateway/usage-report.ts) read.
// The records are defined here, below core (which may import the store, not the other way round), and are
// the gateway's words too: core/gateway/gateway-types.ts re-exports them.

/** Which limit stopped a model request. */
export const BUDGET_LIMITS = ['run', 'caller_usd_per_day', 'caller_tokens_per_day'] as const;
export type BudgetLimit = (typeof BUDGET_LIMITS)[number];

/** Every decision of the egress proxy, as counted in berth_egress_requests_total{decision}. */
export const EGRESS_DECISIONS = [
  'allowed', 'refused_credential', 'refused_mode', 'refused_host', 'refused_address', 'refused_sni', 'refused_protocol', 'failed',
] as const;
export type EgressDecision = (typeof EGRESS_DECISIONS)[number];

/** Token counts as the Messages API reports them. */
export interface TokenCounts {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_creation_input_tokens: number;
  readonly cache_read_input_tokens: number;
}

export const NO_TOKENS: TokenCounts = Object.freeze({ input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });

/** Every token a request used, whatever its kind: what SERVICE_CALLER_TOKENS_PER_DAY counts. */
export function tokenSum(tokens: TokenCounts): number {
  return tokens.input_tokens + tokens.output_tokens + tokens.cache_creation_input_tokens + tokens.cache_read_input_tokens;
}

/** Whose a record is: the run (or agent's run, or clone container) it was made for. */
interface RecordHolder {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly caller: string;
  readonly runId: string;
  readonly sessionId?: string;
  /** The holder's agentId (an agent's requests): GET /usage lists it with the run. */
  readonly agentId?: string;
}

/** One model request the gateway forwarded (or refused: `refusal` set, no tokens). */
export interface ModelRequestRecord extends RecordHolder {
  readonly model: string;
  readonly tokens: TokenCounts;
  /** USD, from engine/pricing.ts's table; kept to the micro-dollar (the table's precision). */
  readonly costUsd: number;
  /** The HTTP status the engine got (the upstream's, or the gateway's refusal). */
  readonly status: number;
  readonly refusal?: { readonly limit: BudgetLimit; readonly message: string };
  /** Time the gateway added before the first byte of the answer reached the engine (ms). */
  readonly overheadMs?: number;
}

export interface EgressDecisionRecord extends RecordHolder {
  /** CONNECT (HTTPS tunnels) or HTTP (plain requests through the proxy). */
  readonly method: 'CONNECT' | 'HTTP';
  readonly host: string;
  readonly port: number;
  readonly decision: EgressDecision;
  /** Why, for a refusal or a failure (the text the client got). */
  readonly reason?: string;
}

/** Sums over a set of model requests. */
export interface UsageTotals {
  /** Every model request recorded, the refused ones included. */
  readonly requests: number;
  /** Requests refused because a budget was spent. */
  readonly refused: number;
  readonly tokens: TokenCounts;
  /** Integer micro-USD: sums stay exact. */
  readonly costMicroUsd: number;
}

export const NO_USAGE: UsageTotals = Object.freeze({ requests: 0, refused: 0, tokens: NO_TOKENS, costMicroUsd: 0 });

export interface DayTotals extends UsageTotals {
  /** UTC date, YYYY-MM-DD. */
  readonly day: string;
}

export interface RunTotals extends UsageTotals {
  readonly runId: string;
  readonly caller: string;
  readonly sessionId?: string;
  readonly agentId?: string;
  /** First and last record of the run (model request or egress decision), ms since the epoch. */
  readonly firstAt: number;
  readonly lastAt: number;
  /** The message of the run's latest budget refusal. */
  readonly refusal?: string;
}

/**
 * The records and their sums. Every call answers a promise: the SQLite file answers at once, PostgreSQL (shared by
 * every node) after a round trip, so the gateway records off its request path (core/gateway/budgets.ts) and
 * keeps the totals its checks read in memory.
 */
export interface UsageStore {
  recordRequest(record: ModelRequestRecord): Promise<void>;
  recordEgress(record: EgressDecisionRecord): Promise<void>;
  /** The caller's model usage on one UTC day. */
  callerDay(caller: string, day: string): Promise<UsageTotals>;
  /** Every caller's model usage on one UTC day (budgets are seeded with today's at start). */
  callersOn(day: string): Promise<Map<string, UsageTotals>>;
  /** The cost recorded for a run so far, whoever's it is (its max_budget_usd). */
  runCostMicroUsd(runId: string): Promise<number>;
  /** The caller's usage per UTC day from `from` to `to` (inclusive); days without a request are left out. */
  days(caller: string, from: string, to: string): Promise<DayTotals[]>;
  /** The caller's runs with model requests in the days from `from` to `to`, counting those requests; latest first. */
  runs(caller: string, from: string, to: string, limit: number): Promise<RunTotals[]>;
  /** One of the caller's runs, all its records counted; undefined when the caller has no record of it. */
  run(caller: string, runId: string): Promise<RunTotals | undefined>;
  /** The caller's latest `limit` model requests of the run, oldest first. */
  requestsOf(caller: string, runId: string, limit: number): Promise<ModelRequestRecord[]>;
  /** The caller's latest `limit` egress decisions of the run, oldest first. */
  egressOf(caller: string, runId: string, limit: number): Promise<EgressDecisionRecord[]>;
  /** Removes the egress decisions made before `before` (ms); answers how many. */
  pruneEgress(before: number): Promise<number>;
  close(): Promise<void>;
}

/** Egress decisions are kept this long (pruned at open and hourly as decisions arrive); model requests are kept. */
export const EGRESS_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
/** How often a store prunes egress decisions, at most. */
export const EGRESS_PRUNE_EVERY_MS = 60 * 60 * 1000;

/** A count that must be a non-negative integer in a row (a Messages API answer could carry anything). */
export function storedCount(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.round(value) : 0;
}

/** The UTC date of a moment, YYYY-MM-DD. */
export function utcDay(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}
