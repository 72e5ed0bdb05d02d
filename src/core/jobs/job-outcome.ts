// How a run's end becomes a job's final state: the outcome of RunService mapped to status, output,
// crash_info and error, and the texts for the ends the service itself causes (stop, restart, DELETE).
import type { Caller } from '../auth/caller.js';
import type { ContainerState } from '../../runtime/ports/containers.js';
import type { BerthError } from '../../errors.js';
import type { RunRequest } from '../run-request.js';
import type { AcceptedRun } from '../runs/run-service.js';
import type { RunResult } from '../runs/run-result.js';
import type { RunMode } from '../runs/run-labels.js';
import type { RunHooks, RunOutcome } from '../runs/run-executor.js';
import type { CrashInfo, CrashReason, JobChange } from '../../store/jobs/job-store.js';

/** What the job service needs of RunService (a fake in unit tests). */
export interface JobRunner {
  accept(request: RunRequest, options: { readonly caller: Caller; readonly slot?: 'now' | 'later' }): Promise<AcceptedRun>;
  abandon(accepted: AcceptedRun): Promise<void>;
  acceptAgain(run: { readonly runId: string; readonly sessionId: string; readonly request: RunRequest; readonly caller: Caller }): Promise<AcceptedRun>;
  reattach(run: { readonly runId: string; readonly sessionId: string; readonly request: RunRequest; readonly caller: Caller }): Promise<{ accepted: AcceptedRun; container: ContainerState } | undefined>;
  execute(accepted: AcceptedRun, mode: RunMode, signal: AbortSignal, hooks?: RunHooks, container?: ContainerState): Promise<RunOutcome>;
  toResult(accepted: AcceptedRun, outcome: RunOutcome): Promise<RunResult>;
  crashError(accepted: AcceptedRun, outcome: Extract<RunOutcome, { kind: 'crashed' }>): BerthError;
  /** The error of a run that ended after the model gateway refused it for a budget (RunService.budgetError). */
  budgetError(accepted: AcceptedRun, outcome: RunOutcome): BerthError | undefined;
}

export const JOB_MESSAGES = {
  cancelled: 'cancelled by DELETE /jobs/:id',
  restartedWhileRunning: 'the service restarted while the job was running, and its container was gone; the job could not be resumed',
  restartedWhilePending: 'the service restarted before the job started, and the job could not be accepted again',
  stoppedWhileRunning: 'the service stopped while the job was running; its container was removed',
  stoppedWhilePending: 'the service stopped before the job started; the job was never run',
  nodeLostWhileRunning: (node: string) =>
    `the node running the job (${node}) was lost (its lease lapsed); the job was not run again, its container is removed if that node comes back`,
  nodeLostWhilePending: (node: string) =>
    `the job's accepting node (${node}) was lost before the job started, and only that node could run it (its session, workspace or secrets are there); the job was never run`,
} as const;

/** crash_info of a job that the service itself cut off; there is no container exit to report. */
export function serviceCrash(reason: Extract<CrashReason, 'service_stop' | 'service_restart'>): CrashInfo {
  return { exit_code: -1, signal: '', partial_output: '', task_completed: false, reason };
}

/** crash_info of a job whose node was lost (issue 26): declared by another node, nothing is known of its end. */
export function nodeLostCrash(): CrashInfo {
  return { exit_code: -1, signal: '', partial_output: '', task_completed: false, reason: 'node_lost' };
}

/** The final status and fields of a job whose run ended with `outcome` (a DELETE is not an outcome: see cancel). */
export async function outcomeChange(runs: JobRunner, accepted: AcceptedRun, outcome: RunOutcome): Promise<JobChange> {
  // Stopped by a budget: failed, with the error naming the limit, however the engine ended.
  const budget = runs.budgetError(accepted, outcome);
  if (budget) {
    const output = outcome.kind === 'failed' ? (outcome.envelope?.result ?? '') : outcome.kind === 'crashed' ? outcome.partialOutput : '';
    return { status: 'failed', output, error: budget.message };
  }
  switch (outcome.kind) {
    case 'completed': {
      const result = await runs.toResult(accepted, outcome);
      return { status: 'completed', output: result.output, ...(result.structured_output !== undefined ? { structuredOutput: result.structured_output } : {}) };
    }
    case 'failed':
      return { status: 'failed', output: outcome.envelope?.result ?? '', error: outcome.message };
    case 'crashed': {
      const crash = { exit_code: outcome.exitCode, signal: outcome.signal, partial_output: outcome.partialOutput, task_completed: outcome.taskCompleted };
      // Aborted without a DELETE (a DELETE already made the job cancelled): the service is stopping.
      if (outcome.reason === 'cancelled') {
        return { status: 'crashed', crashInfo: { ...crash, reason: 'service_stop' }, error: JOB_MESSAGES.stoppedWhileRunning };
      }
      return { status: 'crashed', crashInfo: { ...crash, reason: outcome.reason }, error: runs.crashError(accepted, outcome).message };
    }
  }
}
