// The caller's model usage, as the gateway recorded it: today against the daily limits, then by UTC day and
// by run for a range of days (in the address: /usage?from=…&to=…). Each run opens its model requests and
// the egress proxy's decisions.
import type { UsageReport, UsageRun } from '@berth/client';
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { RefreshButton } from '../components/refresh-button.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { Link, navigate, useLocation } from '../router.js';
import { daysWithRequests, formatCount, formatUsd, limitUse, totalTokens } from '../usage/usage-view.js';

export function UsagePage() {
  const berth = useBerth();
  const { query } = useLocation();
  const from = query.get('from') ?? undefined;
  const to = query.get('to') ?? undefined;
  const usage = useResource((signal) => berth.usage.get({ ...(from ? { from } : {}), ...(to ? { to } : {}) }, { signal }), [berth, from, to]);
  const report = usage.value;
  return (
    <Page title="Usage" actions={<RefreshButton resource={usage} />}>
      <RangeForm key={`${from}/${to}`} from={from ?? report?.from ?? ''} to={to ?? report?.to ?? ''} />
      <ErrorMessage error={usage.error} context="Usage could not be read" />
      {report && (
        <>
          <Today report={report} />
          <Days report={report} />
          <Runs runs={report.runs} />
        </>
      )}
    </Page>
  );
}

function RangeForm(props: { from: string; to: string }) {
  const [from, setFrom] = useState(props.from);
  const [to, setTo] = useState(props.to);
  const submit = (event: Event) => {
    event.preventDefault();
    const query = new URLSearchParams({ ...(from ? { from } : {}), ...(to ? { to } : {}) });
    navigate(`/usage${query.size > 0 ? `?${query}` : ''}`);
  };
  return (
    <form class="form inline-form" onSubmit={submit} aria-label="Days shown">
      <label for="usage-from">From (UTC)</label>
      <input id="usage-from" type="date" value={from} onInput={(e) => setFrom(e.currentTarget.value)} />
      <label for="usage-to">To (UTC)</label>
      <input id="usage-to" type="date" value={to} onInput={(e) => setTo(e.currentTarget.value)} />
      <button type="submit">Show</button>
    </form>
  );
}

function Today({ report }: { report: UsageReport }) {
  const { today, limits } = report;
  return (
    <section class="card" aria-labelledby="usage-today">
      <h2 id="usage-today">Today ({today.date}, UTC)</h2>
      <dl class="facts">
        <dt>Model requests</dt>
        <dd>{formatCount(today.requests)}</dd>
        <dt>Tokens</dt>
        <dd>{limitUse(today.tokens, limits.tokens_per_day, formatCount)}</dd>
        <dt>Estimated cost</dt>
        <dd>{limitUse(today.cost_usd, limits.usd_per_day, formatUsd)}</dd>
      </dl>
      <p class="help">Daily limits reset at 00:00 UTC; once one is reached, model requests are refused and new runs get 429.</p>
    </section>
  );
}

function Days({ report }: { report: UsageReport }) {
  const days = daysWithRequests(report.days);
  const { total } = report;
  return (
    <section class="card" aria-labelledby="usage-days">
      <h2 id="usage-days">By day</h2>
      {days.length === 0 ? (
        <p class="empty">
          No model requests from {report.from} to {report.to}.
        </p>
      ) : (
        <table>
          <caption class="visually-hidden">
            Model usage per UTC day from {report.from} to {report.to}, newest first; days without requests are left out
          </caption>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">Requests</th>
              <th scope="col">Input</th>
              <th scope="col">Output</th>
              <th scope="col">Cache write</th>
              <th scope="col">Cache read</th>
              <th scope="col">Cost</th>
              <th scope="col">Refused</th>
            </tr>
          </thead>
          <tbody>
            {days.map((day) => (
              <tr key={day.date}>
                <td>{day.date}</td>
                <td>{formatCount(day.requests)}</td>
                <td>{formatCount(day.input_tokens)}</td>
                <td>{formatCount(day.output_tokens)}</td>
                <td>{formatCount(day.cache_creation_input_tokens)}</td>
                <td>{formatCount(day.cache_read_input_tokens)}</td>
                <td>{formatUsd(day.cost_usd)}</td>
                <td>{formatCount(day.refused)}</td>
              </tr>
            ))}
          </tbody>
          <tfoot>
            <tr>
              <th scope="row">Total</th>
              <td>{formatCount(total.requests)}</td>
              <td>{formatCount(total.input_tokens)}</td>
              <td>{formatCount(total.output_tokens)}</td>
              <td>{formatCount(total.cache_creation_input_tokens)}</td>
              <td>{formatCount(total.cache_read_input_tokens)}</td>
              <td>{formatUsd(total.cost_usd)}</td>
              <td>{formatCount(total.refused)}</td>
            </tr>
          </tfoot>
        </table>
      )}
    </section>
  );
}

function Runs({ runs }: { runs: readonly UsageRun[] }) {
  return (
    <section class="card" aria-labelledby="usage-runs">
      <h2 id="usage-runs">By run</h2>
      {runs.length === 0 ? (
        <p class="empty">No runs with model requests in these days.</p>
      ) : (
        <table>
          <caption class="visually-hidden">Runs with model requests, latest first; each opens its requests and egress decisions</caption>
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Session or agent</th>
              <th scope="col">Last request</th>
              <th scope="col">Requests</th>
              <th scope="col">Tokens</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((run) => (
              <tr key={run.run_id}>
                <td>
                  <Link href={`/usage/runs/${encodeURIComponent(run.run_id)}`}>
                    <code>{run.run_id}</code>
                  </Link>
                  {run.refusal && (
                    <span class="badge badge-bad" title={run.refusal}>
                      budget reached
                    </span>
                  )}
                </td>
                <td>
                  <Holder run={run} />
                </td>
                <td>
                  <Time iso={run.last_request_at} />
                </td>
                <td>{formatCount(run.requests)}</td>
                <td>{formatCount(totalTokens(run))}</td>
                <td>{formatUsd(run.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The agent or the session a run belongs to, linked to its page. */
export function Holder({ run }: { run: { agent_id?: string; session_id?: string } }) {
  if (run.agent_id) {
    return (
      <Link href={`/agents/${encodeURIComponent(run.agent_id)}`}>
        <code>{run.agent_id}</code>
      </Link>
    );
  }
  if (run.session_id) {
    return (
      <Link href={`/sessions/${encodeURIComponent(run.session_id)}`}>
        <code>{run.session_id}</code>
      </Link>
    );
  }
  return <span>—</span>;
}
