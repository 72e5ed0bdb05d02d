// Model budgets, enforced by the gateway outside the container: a run's max_budget_usd and the operator's
// per-caller daily limits (SERVICE_CALLER_BUDGET_USD_PER_DAY, SERVICE_CALLER_TOKENS_PER_DAY; UTC days).
// The gateway asks `check` before forwarding each model request, so the granularity is one request: a
// request in flight finishes and is counted, the next one is refused. Totals live in memory (the check is
// in every request's path), kept current by the recorder wrapper the gateway writes through, and loaded
// from the usage store when missing: today's callers at start, any other run or day on first use, so a
// restart (async jobs and agents keep running) or a cache eviction loses nothing.
import { LRUCache } from 'lru-cache';
import { tokenSum, utcDay, type UsageStore } from '../../store/usage/usage-store.js';
import type { BudgetCheck, BudgetDecision, BudgetLimit, GrantHolder, UsageRecorder } from './gateway-types.js';

export interface BudgetLimits {
  /** SERVICE_CALLER_BUDGET_USD_PER_DAY; undefined: no limit. */
  readonly usdPerDay?: number;
  /** SERVICE_CALLER_TOKENS_PER_DAY (every kind of token together); undefined: no limit. */
  readonly tokensPerDay?: number;
}

/** What budgets read from the usage store. */
export type UsageTotalsSource = Pick<UsageStore, 'callerDay' | 'callersOn' | 'runCostMicroUsd'>;

interface DaySpend {
  tokens: number;
  costMicroUsd: number;
}

interface RunSpend {
  costMicroUsd: number;
}

/** Entries kept in memory; one evicted is loaded again from the store when next needed. */
const CACHED_ENTRIES = 10_000;

const OK: BudgetDecision = Object.freeze({ ok: true });

export function toMicroUsd(usd: number): number {
  return Math.round(usd * 1e6);
}

/** USD for a message: to the micro-dollar, without trailing zeros (0.0123, 5, 5.0012). */
export function formatUsd(microUsd: number): string {
  return String(Number((microUsd / 1e6).toFixed(6)));
}

export class Budgets implements BudgetCheck {
  private readonly days = new LRUCache<string, DaySpend>({ max: CACHED_ENTRIES });
  private readonly runs = new LRUCache<string, RunSpend>({ max: CACHED_ENTRIES });

  constructor(
    readonly limits: BudgetLimits,
    private readonly source: UsageTotalsSource,
    now: number = Date.now(),
  ) {
    const today = utcDay(now);
    for (const [caller, totals] of source.callersOn(today)) {
      this.days.set(dayKey(caller, today), { tokens: tokenSum(totals.tokens), costMicroUsd: totals.costMicroUsd });
    }
  }

  /** Before each model request of a bound grant: the run's budget, then the caller's daily limits. */
  check(holder: GrantHolder, now: number): BudgetDecision {
    if (holder.budgetUsd !== undefined) {
      const limit = toMicroUsd(holder.budgetUsd);
      const used = this.runSpend(holder.runId).costMicroUsd;
      if (used >= limit) {
        const whose = holder.kind === 'agent' ? 'this agent\'s' : 'this run\'s';
        return refuse('run', `${whose} max_budget_usd (${formatUsd(limit)} USD) is spent: ${formatUsd(used)} USD used`);
      }
    }
    return this.admission(holder.caller, now);
  }

  /** Before a run or agent starts (no container yet): the caller's daily limits only. */
  admission(caller: string, now: number): BudgetDecision {
    const day = utcDay(now);
    const spent = this.daySpend(caller, day);
    const { usdPerDay, tokensPerDay } = this.limits;
    if (usdPerDay !== undefined && spent.costMicroUsd >= toMicroUsd(usdPerDay)) {
      return refuse(
        'caller_usd_per_day',
        `SERVICE_CALLER_BUDGET_USD_PER_DAY (${formatUsd(toMicroUsd(usdPerDay))} USD) is spent for ${day} (UTC): ${formatUsd(spent.costMicroUsd)} USD used; it resets at 00:00 UTC`,
      );
    }
    if (tokensPerDay !== undefined && spent.tokens >= tokensPerDay) {
      return refuse(
        'caller_tokens_per_day',
        `SERVICE_CALLER_TOKENS_PER_DAY (${tokens(tokensPerDay)}) is spent for ${day} (UTC): ${tokens(spent.tokens)} used; it resets at 00:00 UTC`,
      );
    }
    return OK;
  }

  /** The recorder the gateway writes through: each model request is counted here and stored in `store`. */
  recorder(store: UsageRecorder): UsageRecorder {
    return {
      recordRequest: (record) => {
        // Loaded before the record is stored, so a total read from the store never counts it twice.
        const day = this.daySpend(record.caller, utcDay(record.at));
        const run = this.runSpend(record.runId);
        const cost = Math.max(0, toMicroUsd(record.costUsd));
        day.costMicroUsd += cost;
        day.tokens += tokenSum(record.tokens);
        run.costMicroUsd += cost;
        store.recordRequest(record);
      },
      recordEgress: (record) => store.recordEgress(record),
    };
  }

  private daySpend(caller: string, day: string): DaySpend {
    const key = dayKey(caller, day);
    let spend = this.days.get(key);
    if (spend === undefined) {
      const totals = this.source.callerDay(caller, day);
      spend = { tokens: tokenSum(totals.tokens), costMicroUsd: totals.costMicroUsd };
      this.days.set(key, spend);
    }
    return spend;
  }

  private runSpend(runId: string): RunSpend {
    let spend = this.runs.get(runId);
    if (spend === undefined) {
      spend = { costMicroUsd: this.source.runCostMicroUsd(runId) };
      this.runs.set(runId, spend);
    }
    return spend;
  }
}

function dayKey(caller: string, day: string): string {
  // A day has no newline; a caller (a token's name) never starts with a date, so the key is unambiguous.
  return `${day}\n${caller}`;
}

function tokens(count: number): string {
  return count === 1 ? '1 token' : `${count} tokens`;
}

function refuse(limit: BudgetLimit, message: string): BudgetDecision {
  return { ok: false, limit, message };
}
