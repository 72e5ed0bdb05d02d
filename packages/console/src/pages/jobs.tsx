// Runs & jobs: a form to start a run, and the caller's jobs, newest first, their statuses kept current.
import type { JobStatus } from '@berth/client';
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { StatusBadge } from '../components/status-badge.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { JOB_STATUSES } from '../jobs.js';
import { Link } from '../router.js';
import { Pager } from '../components/pager.js';
import { RunForm } from './run-form.js';

const PAGE_SIZE = 20;
const REFRESH_MS = 2000;

export function JobsPage() {
  return (
    <Page title="Runs & jobs">
      <RunForm />
      <JobList />
    </Page>
  );
}

function JobList() {
  const berth = useBerth();
  const [status, setStatus] = useState<JobStatus | ''>('');
  const [offset, setOffset] = useState(0);
  const jobs = useResource(
    (signal) => berth.jobs.list({ limit: PAGE_SIZE, offset, ...(status ? { status } : {}) }, { signal }),
    [berth, status, offset],
    { refreshMs: REFRESH_MS },
  );
  const list = jobs.value?.jobs ?? [];

  return (
    <section class="card" aria-labelledby="jobs-heading">
      <div class="section-head">
        <h2 id="jobs-heading">Jobs</h2>
        <label class="inline">
          Status{' '}
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value as JobStatus | '');
              setOffset(0);
            }}
          >
            <option value="">any</option>
            {JOB_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorMessage error={jobs.error} context="Jobs could not be read" />
      {jobs.value && list.length === 0 ? (
        <p class="empty">No jobs{status ? ` with status ${status}` : ''} yet. Start one with “Queue as an async job”.</p>
      ) : (
        <table>
          <caption class="visually-hidden">Jobs, newest first; statuses refresh every {REFRESH_MS / 1000} seconds</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {list.map((job) => (
              <tr key={job.id}>
                <td>
                  <Link href={`/jobs/${encodeURIComponent(job.id)}`}>
                    <code>{job.id}</code>
                  </Link>
                </td>
                <td>
                  <StatusBadge status={job.status} />
                </td>
                <td>
                  <Time iso={job.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager offset={offset} pageSize={PAGE_SIZE} count={list.length} onOffset={setOffset} label="Jobs pages" />
    </section>
  );
}
