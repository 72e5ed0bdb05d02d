// What SIGTERM/SIGINT does to the work in flight (SERVICE_SHUTDOWN_MODE), before the listener and the
// service's resources close:
//   stop    new work refused; runs, jobs and agents cancelled, their containers removed (jobs: crashed, service_stop)
//   drain   new work refused; runs, queued and running jobs, and agent turns finish (up to
//           SERVICE_SHUTDOWN_DRAIN_TIMEOUT), then as stop
//   detach  new work refused; nothing cancelled: containers run on and the next start follows them again
import type { Logger } from 'pino';
import type { ShutdownMode } from '../config.js';

export interface ShutdownWork {
  readonly pools: { close(): Promise<void> };
  readonly runs: { stopAccepting(): void; drain(): Promise<void> };
  readonly jobs: { idle(): Promise<void>; detach(): Promise<void> };
  /** Absent when the service stops before its agents existed (a failed start). */
  readonly agents: { stopAccepting(): void; turnsDone(): Promise<void>; detach(): Promise<void>; close(): Promise<void> } | undefined;
  /** Cancels every run in flight (the service's shutdown signal). */
  abortRuns(): void;
  /** What is still in flight, by kind, for the progress a drain logs. */
  inFlight(): { readonly runs: readonly string[]; readonly jobs: readonly string[]; readonly agents: readonly string[] };
}

/** How often a drain says what it still waits for. */
const DRAIN_PROGRESS_MS = 5_000;

export async function stopWork(
  settings: { readonly mode: ShutdownMode; readonly drainTimeoutMs: number; readonly drainProgressMs?: number },
  work: ShutdownWork,
  log: Logger,
): Promise<void> {
  work.runs.stopAccepting();
  work.agents?.stopAccepting();
  // Pre-started engines hold no one's work: removed in every mode.
  await work.pools.close();
  if (settings.mode === 'detach') {
    await work.jobs.detach();
    await work.agents?.detach();
    log.info('detached: runs, jobs and agents go on in their containers; the next start follows them again');
    return;
  }
  if (settings.mode === 'drain') {
    log.info({ timeoutMs: settings.drainTimeoutMs }, 'draining: new work is refused; waiting for runs, jobs and agent turns to end');
    const progress = setInterval(() => log.info(work.inFlight(), 'draining: still in flight'), settings.drainProgressMs ?? DRAIN_PROGRESS_MS);
    const drained = await within(settings.drainTimeoutMs, Promise.all([work.runs.drain(), work.jobs.idle(), work.agents?.turnsDone()])).finally(() =>
      clearInterval(progress),
    );
    if (drained) log.info('drained: no work in flight');
    else log.warn({ timeoutMs: settings.drainTimeoutMs }, 'SERVICE_SHUTDOWN_DRAIN_TIMEOUT reached: stopping the work still in flight');
  }
  work.abortRuns();
  await work.runs.drain();
  await work.agents?.close();
}

/** Whether `work` ended within `ms`. */
async function within(ms: number, work: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([work.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
