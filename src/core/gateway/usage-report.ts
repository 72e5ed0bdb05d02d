// What GET /usage and GET /usage/runs/:run_id answer: a caller's model usage by UTC day and by run, and one
// run's requests and egress decisions, read from the usage store. Only the caller's own records: another
// caller's run is "not found", like every other resource. Costs are summed in integer micro-USD and turned
// into USD last, so the days add up to the total exactly.
import { errors } from '../../errors.js';
import { NO_USAGE, tokenSum, utcDay, type UsageStore, type UsageTotals } from '../../store/usage/usage-store.js';
import type { BudgetLimits } from './budgets.js';
import type { RunReportView, UsageCounters, UsageReportView } from './usage-report-schema.js';

export const DEFAULT_DAYS = 7;
export const MAX_DAYS = 92;
/** Runs in a report, requests and egress decisions in a run's: the latest ones. */
export const MAX_LISTED = 500;

const DAY_MS = 24 * 60 * 60 * 1000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

export interface UsageRange {
  readonly from?: string;
  readonly to?: string;
}

export type UsageQueries = Pick<UsageStore, 'callerDay' | 'days' | 'runs' | 'run' | 'requestsOf' | 'egressOf'>;

function counters(totals: UsageTotals): UsageCounters {
  return {
    requests: totals.requests,
    ...totals.tokens,
    cost_usd: totals.costMicroUsd / 1e6,
    refused: totals.refused,
  };
}

function sum(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    requests: a.requests + b.requests,
    refused: a.refused + b.refused,
    tokens: {
      input_tokens: a.tokens.input_tokens + b.tokens.input_tokens,
      output_tokens: a.tokens.output_tokens + b.tokens.output_tokens,
      cache_creation_input_tokens: a.tokens.cache_creation_input_tokens + b.tokens.cache_creation_input_tokens,
      cache_read_input_tokens: a.tokens.cache_read_input_tokens + b.tokens.cache_read_input_tokens,
    },
    costMicroUsd: a.costMicroUsd + b.costMicroUsd,
  };
}

/** Midnight UTC of a YYYY-MM-DD date, or undefined when it is not a real date. */
function parseDay(text: string): number | undefined {
  const match = DATE.exec(text);
  if (!match) return undefined;
  const at = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  return utcDay(at) === text ? at : undefined;
}

const iso = (at: number) => new Date(at).toISOString();

export class UsageReport {
  constructor(
    private readonly store: UsageQueries,
    private readonly limits: BudgetLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /** The days of a report: `to` defaults to today, `from` to the 7 days up to `to`; at most 92 days. */
  range(range: UsageRange): { from: string; to: string; days: string[] } {
    const to = range.to === undefined ? Date.parse(`${utcDay(this.now())}T00:00:00Z`) : parseDay(range.to);
    if (to === undefined) throw errors.badRequest(`to: "${range.to}" is not a date; use YYYY-MM-DD (UTC)`);
    const from = range.from === undefined ? to - (DEFAULT_DAYS - 1) * DAY_MS : parseDay(range.from);
    if (from === undefined) throw errors.badRequest(`from: "${range.from}" is not a date; use YYYY-MM-DD (UTC)`);
    if (from > to) throw errors.badRequest(`from: ${utcDay(from)} is after to (${utcDay(to)})`);
    const count = Math.round((to - from) / DAY_MS) + 1;
    if (count > MAX_DAYS) throw errors.badRequest(`from: ${utcDay(from)} to ${utcDay(to)} spans ${count} days; at most ${MAX_DAYS}`);
    const days = Array.from({ length: count }, (_, i) => utcDay(from + i * DAY_MS));
    return { from: days[0]!, to: days[days.length - 1]!, days };
  }

  async report(caller: string, requested: UsageRange): Promise<UsageReportView> {
    const { from, to, days } = this.range(requested);
    const today = utcDay(this.now());
    const [recordedDays, todays, runs] = await Promise.all([
      this.store.days(caller, from, to),
      this.store.callerDay(caller, today),
      this.store.runs(caller, from, to, MAX_LISTED),
    ]);
    const recorded = new Map(recordedDays.map((day) => [day.day, day as UsageTotals]));
    let total = NO_USAGE;
    for (const totals of recorded.values()) total = sum(total, totals);
    return {
      caller,
      from,
      to,
      limits: { usd_per_day: this.limits.usdPerDay ?? null, tokens_per_day: this.limits.tokensPerDay ?? null },
      today: { date: today, requests: todays.requests, tokens: tokenSum(todays.tokens), cost_usd: todays.costMicroUsd / 1e6 },
      total: counters(total),
      days: days.map((date) => ({ date, ...counters(recorded.get(date) ?? NO_USAGE) })),
      runs: runs.map((run) => ({
        run_id: run.runId,
        ...(run.sessionId !== undefined ? { session_id: run.sessionId } : {}),
        ...(run.agentId !== undefined ? { agent_id: run.agentId } : {}),
        first_request_at: iso(run.firstAt),
        last_request_at: iso(run.lastAt),
        ...counters(run),
        ...(run.refusal !== undefined ? { refusal: run.refusal } : {}),
      })),
    };
  }

  async run(caller: string, runId: string): Promise<RunReportView> {
    const [run, requests, egress] = await Promise.all([
      this.store.run(caller, runId),
      this.store.requestsOf(caller, runId, MAX_LISTED),
      this.store.egressOf(caller, runId, MAX_LISTED),
    ]);
    if (run === undefined) throw errors.notFound(`run ${runId}`);
    return {
      run_id: run.runId,
      ...(run.sessionId !== undefined ? { session_id: run.sessionId } : {}),
      ...(run.agentId !== undefined ? { agent_id: run.agentId } : {}),
      first_request_at: iso(run.firstAt),
      last_request_at: iso(run.lastAt),
      totals: counters(run),
      ...(run.refusal !== undefined ? { refusal: run.refusal } : {}),
      requests: requests.map((request) => ({
        at: iso(request.at),
        model: request.model,
        status: request.status,
        ...request.tokens,
        cost_usd: request.costUsd,
        ...(request.overheadMs !== undefined ? { overhead_ms: request.overheadMs } : {}),
        ...(request.refusal !== undefined ? { refusal: request.refusal.message } : {}),
      })),
      egress: egress.map((decision) => ({
        at: iso(decision.at),
        method: decision.method,
        host: decision.host,
        port: decision.port,
        decision: decision.decision,
        ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
      })),
    };
  }
}
