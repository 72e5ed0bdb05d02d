// One run's usage: its totals, the egress proxy's decisions on its connections (hosts reached, and refused
// with the reason the engine was given), and its model requests. Read from GET /usage/runs/{run_id}: the
// latest 500 of each.
import type { EgressDecisionRecord, ModelRequestRecord, RunUsageReport } from '@berth/client';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { RefreshButton } from '../components/refresh-button.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { Link } from '../router.js';
import { decisionLabel, decisionTone, egressSummary, formatCount, formatUsd, totalTokens } from '../usage/usage-view.js';
import { Holder } from './usage.js';

export function UsageRunPage({ id }: { id: string }) {
  const berth = useBerth();
  const run = useResource((signal) => berth.usage.run(id, { signal }), [berth, id]);
  return (
    <Page title={`Run ${id}`} actions={<RefreshButton resource={run} />}>
      <p>
        <Link href="/usage">← Usage</Link>
      </p>
      <ErrorMessage error={run.error} context="The run's usage could not be read" />
      {run.value && (
        <>
          <Totals run={run.value} />
          <Egress egress={run.value.egress} />
          <Requests requests={run.value.requests} />
        </>
      )}
    </Page>
  );
}

function Totals({ run }: { run: RunUsageReport }) {
  const { totals } = run;
  return (
    <section class="card" aria-labelledby="run-totals">
      <h2 id="run-totals">Totals</h2>
      <dl class="facts">
        <dt>{run.agent_id ? 'Agent' : 'Session'}</dt>
        <dd>
          <Holder run={run} />
        </dd>
        <dt>First record</dt>
        <dd>
          <Time iso={run.first_request_at} />
        </dd>
        <dt>Last record</dt>
        <dd>
          <Time iso={run.last_request_at} />
        </dd>
        <dt>Model requests</dt>
        <dd>
          {formatCount(totals.requests)}
          {totals.refused > 0 && ` (${formatCount(totals.refused)} refused)`}
        </dd>
        <dt>Tokens</dt>
        <dd>
          {formatCount(totalTokens(totals))} (input {formatCount(totals.input_tokens)}, output {formatCount(totals.output_tokens)}, cache write{' '}
          {formatCount(totals.cache_creation_input_tokens)}, cache read {formatCount(totals.cache_read_input_tokens)})
        </dd>
        <dt>Estimated cost</dt>
        <dd>{formatUsd(totals.cost_usd)}</dd>
      </dl>
      {run.refusal && (
        <div class="error">
          <p>Model budget reached: {run.refusal}</p>
        </div>
      )}
    </section>
  );
}

function Egress({ egress }: { egress: readonly EgressDecisionRecord[] }) {
  const summary = egressSummary(egress);
  return (
    <section class="card" aria-labelledby="run-egress">
      <h2 id="run-egress">Egress decisions</h2>
      {egress.length === 0 ? (
        <p class="empty">The run asked the egress proxy for no host.</p>
      ) : (
        <>
          <ul class="decision-summary" aria-label="Decisions by kind">
            {summary.map((entry) => (
              <li key={entry.decision}>
                <span class={`badge badge-${decisionTone(entry.decision)}`}>{decisionLabel(entry.decision)}</span> ×{entry.count}: {entry.hosts.join(', ')}
              </li>
            ))}
          </ul>
          <table>
            <caption class="visually-hidden">Every connection the run asked the egress proxy for, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Method</th>
                <th scope="col">Host</th>
                <th scope="col">Decision</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {egress.map((record, index) => (
                <tr key={index}>
                  <td>
                    <Time iso={record.at} />
                  </td>
                  <td>{record.method}</td>
                  <td class="egress-host">
                    <code>
                      {record.host}:{record.port}
                    </code>
                  </td>
                  <td>
                    <span class={`badge badge-${decisionTone(record.decision)}`}>{decisionLabel(record.decision)}</span>
                  </td>
                  <td>{record.reason ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}

function Requests({ requests }: { requests: readonly ModelRequestRecord[] }) {
  return (
    <section class="card" aria-labelledby="run-requests">
      <h2 id="run-requests">Model requests</h2>
      {requests.length === 0 ? (
        <p class="empty">No model requests.</p>
      ) : (
        <table>
          <caption class="visually-hidden">The run's model requests through the gateway, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Model</th>
              <th scope="col">Status</th>
              <th scope="col">Input</th>
              <th scope="col">Output</th>
              <th scope="col">Cache write</th>
              <th scope="col">Cache read</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {requests.map((request, index) => (
              <tr key={index}>
                <td>
                  <Time iso={request.at} />
                </td>
                <td>{request.model}</td>
                <td>
                  {request.refusal ? (
                    <span class="badge badge-bad" title={request.refusal}>
                      {request.status} refused
                    </span>
                  ) : (
                    request.status
                  )}
                </td>
                <td>{formatCount(request.input_tokens)}</td>
                <td>{formatCount(request.output_tokens)}</td>
                <td>{formatCount(request.cache_creation_input_tokens)}</td>
                <td>{formatCount(request.cache_read_input_tokens)}</td>
                <td>{formatUsd(request.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
