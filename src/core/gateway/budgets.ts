// Model budgets, enforced by the gateway outside the container: a run's max_budget_usd and the operator's
// per-caller daily limits (SERVICE_CALLER_BUDGET_USD_PER_DAY, SERVICE_CALLER_TOKENS_PER_DAY; UTC days).
// The gateway asks `check` before forwarding each model request, so the granularity is one request: a
// request in flight finishes and is counted, the next one is refused. Totals live in memory (the check is
// in every request's path and answers from there without touching the store), kept current by the recorder
// wrapper the gateway writes through, and loaded from the usage store when missing: today's callers at start
// (Budgets.open), any other run or day on first use, so a restart (async jobs and agents keep running) or a
// cache eviction loses nothing. Loads are asynchronous (the store may be PostgreSQL): one load per missing
// total, shared by every request that needs it meanwhile.
//
// With several nodes on one PostgreSQL store each node counts its own gateway's requests on top of what it
// loaded: a total another node adds to after the load is seen here only once it is loaded again (evicted, or
// a restart). Budgets are exact per node, not yet across nodes.
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

/** Where the recorder stores what it counted. */
export type UsageSink = Pick<UsageStore, 'recordRequest' | 'recordEgress'>;

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
  /** Totals being read from the store: every request needing one meanwhile waits for the same read. */
  private readonly loadingDays = new Map<string, Promise<DaySpend>>();
  private readonly loadingRuns = new Map<string, Promise<RunSpend>>();

  /** Budgets with nothing in memory yet: every total is loaded on first use. */
  constructor(
    readonly limits: BudgetLimits,
    private readonly source: UsageTotalsSource,
  ) {}

  /** Budgets with today's totals of every caller already in memory: the first requests after a start wait for nothing. */
  static async open(limits: BudgetLimits, source: UsageTotalsSource, now: number = Date.now()): Promise<Budgets> {
    const budgets = new Budgets(limits, source);
    const today = utcDay(now);
    for (const [caller, totals] of await source.callersOn(today)) {
      budgets.days.set(dayKey(caller, today), { tokens: tokenSum(totals.tokens), costMicroUsd: totals.costMicroUsd });
    }
    return budgets;
  }

  /** Before each model request of a bound grant: the run's budget, then the caller's daily limits. */
  async check(holder: GrantHolder, now: number): Promise<BudgetDecision> {
    if (holder.budgetUsd !== undefined) {
      const limit = toMicroUsd(holder.budgetUsd);
      const used = (this.runs.get(holder.runId) ?? (await this.runSpend(holder.runId))).costMicroUsd;
      if (used >= limit) {
        const whose = holder.kind === 'agent' ? 'this agent\'s' : 'this run\'s';
        return refuse('run', `${whose} max_budget_usd (${formatUsd(limit)} USD) is spent: ${formatUsd(used)} USD used`);
      }
    }
    return this.admission(holder.caller, now);
  }

  /** Before a run or agent starts (no container yet): the caller's daily limits only. */
  async admission(caller: string, now: number): Promise<BudgetDecision> {
    const day = utcDay(now);
    const spent = this.days.get(dayKey(caller, day)) ?? (await this.daySpend(caller, day));
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

  /**
   * The recorder the gateway writes through: each model request is counted here and stored in `store`. The
   * gateway calls it once the answer is sent and does not wait for it; a count whose total is in memory is
   * added before the call returns, so the next check sees it.
   */
  recorder(store: UsageSink): UsageRecorder {
    return {
      recordRequest: async (record) => {
        const cost = Math.max(0, toMicroUsd(record.costUsd));
        const day = utcDay(record.at);
        // Each total loaded before the record is stored, so a total read from the store never counts it twice.
        await Promise.all([
          addTo(this.days.get(dayKey(record.caller, day)) ?? this.daySpend(record.caller, day), (spend) => {
            spend.costMicroUsd += cost;
            spend.tokens += tokenSum(record.tokens);
          }),
          addTo(this.runs.get(record.runId) ?? this.runSpend(record.runId), (spend) => {
            spend.costMicroUsd += cost;
          }),
        ]);
        await store.recordRequest(record);
      },
      recordEgress: (record) => store.recordEgress(record),
    };
  }

  private daySpend(caller: string, day: string): Promise<DaySpend> {
    return loadOnce(this.days, this.loadingDays, dayKey(caller, day), async () => {
      const totals = await this.source.callerDay(caller, day);
      return { tokens: tokenSum(totals.tokens), costMicroUsd: totals.costMicroUsd };
    });
  }

  private runSpend(runId: string): Promise<RunSpend> {
    return loadOnce(this.runs, this.loadingRuns, runId, async () => ({ costMicroUsd: await this.source.runCostMicroUsd(runId) }));
  }
}

/** Adds to a total at once when it is in memory, else once it is loaded. */
async function addTo<T>(spend: T | Promise<T>, add: (spend: T) => void): Promise<void> {
  add(spend instanceof Promise ? await spend : spend);
}

/** The cached value of `key`, else one read of it shared by every caller until it lands in the cache. */
async function loadOnce<T extends object>(cache: LRUCache<string, T>, loading: Map<string, Promise<T>>, key: string, read: () => Promise<T>): Promise<T> {
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  let pending = loading.get(key);
  if (pending === undefined) {
    pending = read()
      .then((value) => {
        cache.set(key, value);
        return value;
      })
      .finally(() => loading.delete(key));
    loading.set(key, pending);
  }
  return pending;
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
