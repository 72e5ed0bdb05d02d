// What `berth usage` prints for people: the caller's usage by UTC day and by run (GET /usage), or one run's
// model requests and egress decisions (GET /usage/runs/{id}), as aligned tables. Host names, reasons and
// refusals were chosen by code in a container: every cell goes through visible().
import type { RunUsageReport, UsageReport } from '@berth/client';
import { alignColumns, shortTime } from './output.js';
import { visible } from './terminal-text.js';

/** USD to the micro-dollar the gateway records, without trailing zeros: 0.000123, 5.0012, 12. */
export function usd(amount: number): string {
  return String(Number(amount.toFixed(6)));
}

/** A count with thousands grouped: 1234567 → "1,234,567". */
export function count(value: number): string {
  return value.toLocaleString('en-US');
}

function table(rows: readonly (readonly string[])[]): string {
  return alignColumns(rows.map((row) => row.map(visible)));
}

function limitsText(limits: UsageReport['limits']): string {
  const set = [
    limits.usd_per_day !== null ? `${usd(limits.usd_per_day)} USD` : undefined,
    limits.tokens_per_day !== null ? `${count(limits.tokens_per_day)} tokens` : undefined,
  ].filter((limit) => limit !== undefined);
  return set.length === 0 ? 'none' : `${set.join(', ')} per UTC day`;
}

export function usageReportText(report: UsageReport): string {
  const { today } = report;
  const facts = table([
    ['caller:', report.caller],
    ['period:', `${report.from} to ${report.to} (UTC)`],
    ['today:', `${count(today.requests)} requests, ${count(today.tokens)} tokens, ${usd(today.cost_usd)} USD (${today.date})`],
    ['limits:', limitsText(report.limits)],
  ]);
  const totals = report.total;
  const days = table([
    ['DATE', 'REQUESTS', 'INPUT', 'OUTPUT', 'CACHE WRITE', 'CACHE READ', 'COST USD', 'REFUSED'],
    ...[...report.days, { ...totals, date: 'total' }].map((day) => [
      day.date,
      count(day.requests),
      count(day.input_tokens),
      count(day.output_tokens),
      count(day.cache_creation_input_tokens),
      count(day.cache_read_input_tokens),
      usd(day.cost_usd),
      count(day.refused),
    ]),
  ]);
  const runs =
    report.runs.length === 0
      ? 'no runs with model requests in this period\n'
      : table([
          ['RUN', 'SESSION / AGENT', 'FIRST REQUEST', 'LAST REQUEST', 'REQUESTS', 'TOKENS', 'COST USD', 'REFUSAL'],
          ...report.runs.map((run) => [
            run.run_id,
            run.agent_id ?? run.session_id ?? '',
            shortTime(run.first_request_at),
            shortTime(run.last_request_at),
            count(run.requests),
            count(run.input_tokens + run.output_tokens + run.cache_creation_input_tokens + run.cache_read_input_tokens),
            usd(run.cost_usd),
            run.refusal ?? '',
          ]),
        ]);
  return `${facts}\n${days}\n${runs}`;
}

export function runUsageText(run: RunUsageReport): string {
  const { totals } = run;
  const fields: [string, string | undefined][] = [
    ['run:', run.run_id],
    ['session:', run.session_id],
    ['agent:', run.agent_id],
    ['first:', shortTime(run.first_request_at)],
    ['last:', shortTime(run.last_request_at)],
    ['requests:', `${count(totals.requests)}${totals.refused > 0 ? ` (${count(totals.refused)} refused)` : ''}`],
    ['tokens:', `input ${count(totals.input_tokens)}, output ${count(totals.output_tokens)}, cache write ${count(totals.cache_creation_input_tokens)}, cache read ${count(totals.cache_read_input_tokens)}`],
    ['cost:', `${usd(totals.cost_usd)} USD`],
    ['refusal:', run.refusal],
  ];
  const facts = table(fields.filter((field): field is [string, string] => field[1] !== undefined));
  const requests =
    run.requests.length === 0
      ? 'no model requests\n'
      : table([
          ['AT', 'MODEL', 'STATUS', 'INPUT', 'OUTPUT', 'CACHE WRITE', 'CACHE READ', 'COST USD', 'OVERHEAD MS', 'REFUSAL'],
          ...run.requests.map((request) => [
            shortTime(request.at),
            request.model,
            String(request.status),
            count(request.input_tokens),
            count(request.output_tokens),
            count(request.cache_creation_input_tokens),
            count(request.cache_read_input_tokens),
            usd(request.cost_usd),
            request.overhead_ms === undefined ? '' : request.overhead_ms.toFixed(1),
            request.refusal ?? '',
          ]),
        ]);
  const egress =
    run.egress.length === 0
      ? 'no egress decisions\n'
      : table([
          ['AT', 'METHOD', 'HOST', 'DECISION', 'REASON'],
          ...run.egress.map((decision) => [shortTime(decision.at), decision.method, `${decision.host}:${decision.port}`, decision.decision, decision.reason ?? '']),
        ]);
  return `${facts}\nModel requests\n${requests}\nEgress\n${egress}`;
}
