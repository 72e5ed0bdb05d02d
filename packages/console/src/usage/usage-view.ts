// How the Usage pages read the gateway's records: amounts, how much of a daily limit is used, and the egress
// proxy's decisions as words with a tone and as counts per decision (a run that tried many hosts shows its
// refusals first, not buried in a long list).
import type { EgressDecisionRecord, UsageDay } from '@berth/client';

type Counters = Pick<UsageDay, 'input_tokens' | 'output_tokens' | 'cache_creation_input_tokens' | 'cache_read_input_tokens'>;

const grouped = new Intl.NumberFormat('en-US');

/** A count with thousands grouped: 1234567 → "1,234,567". */
export function formatCount(value: number): string {
  return grouped.format(value);
}

/** USD to the micro-dollar the gateway records, without trailing zeros: "$0.000123", "$5.0012", "$12". */
export function formatUsd(amount: number): string {
  return `$${String(Number(amount.toFixed(6)))}`;
}

/** Every token of a request, a run or a day, whatever its kind (what SERVICE_CALLER_TOKENS_PER_DAY counts). */
export function totalTokens(counters: Counters): number {
  return counters.input_tokens + counters.output_tokens + counters.cache_creation_input_tokens + counters.cache_read_input_tokens;
}

/** "0.42 of 5 (8 %)" for a used amount against a daily limit; "no limit" without one. */
export function limitUse(used: number, limit: number | null, format: (value: number) => string): string {
  if (limit === null) return 'no limit';
  const share = limit === 0 ? 100 : Math.min(100, Math.floor((used / limit) * 100));
  return `${format(used)} of ${format(limit)} (${share} %)`;
}

export type DecisionTone = 'good' | 'bad' | 'muted';

/** allowed: good; every refusal: bad; a failure to resolve or connect (not a policy decision): muted. */
export function decisionTone(decision: string): DecisionTone {
  if (decision === 'allowed') return 'good';
  if (decision.startsWith('refused')) return 'bad';
  return 'muted';
}

/** "refused_host" → "refused: host not allowed", as a person reads it. */
export function decisionLabel(decision: string): string {
  const labels: Record<string, string> = {
    allowed: 'allowed',
    refused_credential: 'refused: no valid run token',
    refused_mode: 'refused: network none',
    refused_host: 'refused: host not allowed',
    refused_address: 'refused: internal address',
    refused_sni: 'refused: TLS name mismatch',
    refused_protocol: 'refused: not TLS',
    failed: 'failed',
  };
  return labels[decision] ?? decision.replace(/_/g, ' ');
}

export interface DecisionCount {
  readonly decision: string;
  readonly count: number;
  /** The distinct host:port pairs of these decisions, in the order first seen. */
  readonly hosts: readonly string[];
}

/** The decisions of a run counted per decision: refusals first, then failures, then what was allowed. */
export function egressSummary(egress: readonly EgressDecisionRecord[]): DecisionCount[] {
  const byDecision = new Map<string, { count: number; hosts: string[] }>();
  for (const record of egress) {
    const entry = byDecision.get(record.decision) ?? { count: 0, hosts: [] };
    entry.count += 1;
    const host = `${record.host}:${record.port}`;
    if (!entry.hosts.includes(host)) entry.hosts.push(host);
    byDecision.set(record.decision, entry);
  }
  const rank: Record<DecisionTone, number> = { bad: 0, muted: 1, good: 2 };
  return [...byDecision.entries()]
    .map(([decision, { count, hosts }]) => ({ decision, count, hosts }))
    .sort((a, b) => rank[decisionTone(a.decision)] - rank[decisionTone(b.decision)] || b.count - a.count || a.decision.localeCompare(b.decision));
}

/** The days of a report that had any model request, newest first (a 92-day report is mostly empty days). */
export function daysWithRequests<D extends Pick<UsageDay, 'date' | 'requests'>>(days: readonly D[]): D[] {
  return days.filter((day) => day.requests > 0).sort((a, b) => b.date.localeCompare(a.date));
}
