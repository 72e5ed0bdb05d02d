// The public shapes of a job: what GET /jobs/:id answers and what its webhook carries. Kept apart from
// the stored record so storage columns (request, run id, webhook bookkeeping) never leak by accident.
import type { CrashInfo, Job, JobStatus, JobSummary } from '../../store/jobs/job-store.js';

/** Every job status, for the HTTP schemas (which may not import the store). */
export { JOB_STATUSES } from '../../store/jobs/job-store.js';

export interface JobView {
  readonly id: string;
  readonly status: JobStatus;
  readonly output: string;
  readonly structured_output?: unknown;
  readonly session_id: string;
  /** null unless status is crashed. */
  readonly crash_info: CrashInfo | null;
  /** Why the job did not complete (failed, crashed, cancelled); null otherwise. */
  readonly error: string | null;
  readonly created_at: string;
  readonly updated_at: string;
  readonly finished_at: string | null;
}

export interface JobListItem {
  readonly id: string;
  readonly status: JobStatus;
  readonly created_at: string;
}

/** The body of the `job.finished` webhook. */
export interface JobFinishedPayload {
  readonly event: 'job.finished';
  readonly job_id: string;
  readonly status: JobStatus;
  readonly session_id: string;
  readonly output: string;
  readonly structured_output?: unknown;
  readonly crash_info: CrashInfo | null;
  readonly error?: string;
  readonly created_at: string;
  readonly finished_at: string;
}

export function jobView(job: Job): JobView {
  return {
    id: job.id,
    status: job.status,
    output: job.output,
    ...(job.structuredOutput !== undefined ? { structured_output: job.structuredOutput } : {}),
    session_id: job.sessionId,
    crash_info: job.status === 'crashed' ? job.crashInfo : null,
    error: job.error,
    created_at: job.createdAt,
    updated_at: job.updatedAt,
    finished_at: job.finishedAt,
  };
}

export function jobListItem(job: JobSummary): JobListItem {
  return { id: job.id, status: job.status, created_at: job.createdAt };
}

/** Deterministic for a finished job: a redelivery after a restart sends the same bytes. */
export function jobFinishedPayload(job: Job): JobFinishedPayload {
  if (job.finishedAt === null) throw new Error(`job ${job.id} has not finished`);
  return {
    event: 'job.finished',
    job_id: job.id,
    status: job.status,
    session_id: job.sessionId,
    output: job.output,
    ...(job.structuredOutput !== undefined ? { structured_output: job.structuredOutput } : {}),
    crash_info: job.status === 'crashed' ? job.crashInfo : null,
    ...(job.error !== null ? { error: job.error } : {}),
    created_at: job.createdAt,
    finished_at: job.finishedAt,
  };
}
