// One job: its status followed until it is final, then its output, or why it failed and what the engine
// printed before a crash (crash_info).
import type { Job } from '@berth/client';
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { StatusBadge } from '../components/status-badge.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { isFinished } from '../jobs.js';
import { Link } from '../router.js';

const REFRESH_MS = 1000;

export function JobPage({ id }: { id: string }) {
  const berth = useBerth();
  const job = useResource((signal) => berth.jobs.get(id, { signal }), [berth, id], {
    refreshMs: REFRESH_MS,
    keepRefreshing: (value) => !isFinished(value.status),
  });
  const [cancelError, setCancelError] = useState<unknown>();
  const [cancelling, setCancelling] = useState(false);

  const cancel = async () => {
    setCancelling(true);
    setCancelError(undefined);
    try {
      await berth.jobs.cancel(id);
      job.reload();
    } catch (error) {
      setCancelError(error);
    } finally {
      setCancelling(false);
    }
  };

  const value = job.value;
  const cancellable = value !== undefined && !isFinished(value.status);
  return (
    <Page
      title={`Job ${id}`}
      actions={
        cancellable && (
          <button type="button" class="danger" onClick={cancel} disabled={cancelling}>
            {cancelling ? 'Cancelling…' : 'Cancel job'}
          </button>
        )
      }
    >
      <p>
        <Link href="/jobs">← All jobs</Link>
      </p>
      <ErrorMessage error={job.error} context="The job could not be read" />
      <ErrorMessage error={cancelError} context="The job was not cancelled" />
      {value && <JobDetails job={value} />}
    </Page>
  );
}

function JobDetails({ job }: { job: Job }) {
  return (
    <>
      <section class="card" aria-labelledby="job-status">
        <h2 id="job-status">Status</h2>
        <p role="status" aria-live="polite" class="job-status">
          <StatusBadge status={job.status} />
          {!isFinished(job.status) && <span class="help"> following…</span>}
        </p>
        <dl class="facts">
          <dt>Session</dt>
          <dd>
            <Link href={`/sessions/${encodeURIComponent(job.session_id)}`}>
              <code>{job.session_id}</code>
            </Link>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time iso={job.created_at} />
          </dd>
          <dt>Last change</dt>
          <dd>
            <Time iso={job.updated_at} />
          </dd>
          <dt>Finished</dt>
          <dd>
            <Time iso={job.finished_at} />
          </dd>
        </dl>
        {job.error && (
          <div class="error">
            <p>{job.error}</p>
          </div>
        )}
      </section>
      <section class="card" aria-labelledby="job-output">
        <h2 id="job-output">Output</h2>
        {job.output ? <pre class="output" data-testid="job-output">{job.output}</pre> : <p class="empty">{isFinished(job.status) ? 'No output.' : 'The output appears when the job has completed.'}</p>}
        {job.structured_output !== undefined && (
          <>
            <h3>Structured output</h3>
            <pre class="output">{JSON.stringify(job.structured_output, null, 2)}</pre>
          </>
        )}
      </section>
      {job.crash_info && (
        <section class="card" aria-labelledby="job-crash">
          <h2 id="job-crash">Crash information</h2>
          <dl class="facts">
            <dt>Reason</dt>
            <dd>{job.crash_info.reason.replace(/_/g, ' ')}</dd>
            <dt>Exit code</dt>
            <dd>{job.crash_info.exit_code}</dd>
            <dt>Signal</dt>
            <dd>{job.crash_info.signal || '—'}</dd>
            <dt>Task completed</dt>
            <dd>{job.crash_info.task_completed ? 'yes' : 'no'}</dd>
          </dl>
          <details>
            <summary>Partial output (the engine's stream-json lines before the end)</summary>
            <pre class="output">{job.crash_info.partial_output || '(none)'}</pre>
          </details>
        </section>
      )}
    </>
  );
}
