// What the console knows about job statuses.
import type { JobStatus } from '@berth/client';

export const JOB_STATUSES: readonly JobStatus[] = ['pending', 'running', 'completed', 'failed', 'crashed', 'cancelled'];

/** A job in one of these statuses changes no more. */
export function isFinished(status: JobStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'crashed' || status === 'cancelled';
}
