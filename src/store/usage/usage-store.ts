// What the model gateway and the egress proxy saw, behind a small interface: one record per model request
// (tokens, cost, the status the engine got, a budget refusal) and per egress decision, and the sums that
// budgets (core/gateway/budgets.ts) and GET /usage (core/gateway/usage-report.ts) read.
// The records have the shapes of core/gateway/gateway-types.ts (ModelRequestRecord, EgressDecisionRecord):
// the store may not import core, so they are restated here and checked against each other where the store
// is handed to the gateway (server.ts).

export const BUDGET_LIMITS = ['run', 'caller_usd_per_day', 'caller_tokens_per_day'] as const;
export type BudgetLimitName = (typeof BUDGET_LIMITS)[number];

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

export interface ModelRequestEntry {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly caller: string;
  readonly runId: string;
  readonly sessionId?: string;
  readonly agentId?: string;
  readonly model: string;
  readonly tokens: TokenCounts;
  /** USD; kept to the micro-dollar (the price table's precision). */
  readonly costUsd: number;
  readonly status: number;
  readonly refusal?: { readonly limit: BudgetLimitName; readonly message: string };
  readonly overheadMs?: number;
}

export interface EgressEntry {
  readonly at: number;
  readonly caller: string;
  readonly runId: string;
  readonly sessionId?: string;
  readonly agentId?: string;
  readonly method: 'CONNECT' | 'HTTP';
  readonly host: string;
  readonly port: number;
  readonly decision: string;
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

export interface UsageStore {
  recordRequest(entry: ModelRequestEntry): void;
  recordEgress(entry: EgressEntry): void;
  /** The caller's model usage on one UTC day. */
  callerDay(caller: string, day: string): UsageTotals;
  /** Every caller's model usage on one UTC day (budgets are seeded with today's at start). */
  callersOn(day: string): Map<string, UsageTotals>;
  /** The cost recorded for a run so far, whoever's it is (its max_budget_usd). */
  runCostMicroUsd(runId: string): number;
  /** The caller's usage per UTC day from `from` to `to` (inclusive); days without a request are left out. */
  days(caller: string, from: string, to: string): DayTotals[];
  /** The caller's runs with model requests in the days from `from` to `to`, counting those requests; latest first. */
  runs(caller: string, from: string, to: string, limit: number): RunTotals[];
  /** One of the caller's runs, all its records counted; undefined when the caller has no record of it. */
  run(caller: string, runId: string): RunTotals | undefined;
  /** The caller's latest `limit` model requests of the run, oldest first. */
  requestsOf(caller: string, runId: string, limit: number): ModelRequestEntry[];
  /** The caller's latest `limit` egress decisions of the run, oldest first. */
  egressOf(caller: string, runId: string, limit: number): EgressEntry[];
  /** Removes the egress decisions made before `before` (ms); answers how many. */
  pruneEgress(before: number): number;
  close(): void;
}

/** The UTC date of a moment, YYYY-MM-DD. */
export function utcDay(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}
