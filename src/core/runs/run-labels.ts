// The words a finished run is counted and logged under: its mode (how it was asked for) and its outcome.
// One list each, here: the run service emits them, /metrics pre-creates a series for each, and
// docs/auth.md lists them (test/unit/run-labels.test.ts holds the three together).
import type { RunOutcome } from './run-executor.js';

/** How a run was asked for: POST /run, POST /jobs, POST /run/stream, or a persistent agent's turn. */
export const RUN_MODES = ['sync', 'async', 'stream', 'agent'] as const;
export type RunMode = (typeof RUN_MODES)[number];

/**
 * How a run ended. `crashed` is an engine that died by a signal or exit code of its own; `timeout`, `oom`
 * and `cancelled` are the crashes Berth can name; `error` is a run that ended in an error before the
 * engine had an outcome (its stack, image or container could not be made ready).
 */
export const RUN_OUTCOMES = ['completed', 'failed', 'crashed', 'cancelled', 'timeout', 'oom', 'error'] as const;
export type RunOutcomeLabel = (typeof RUN_OUTCOMES)[number];

/** The outcome label of a run: `undefined` when it threw before the engine had an outcome. */
export function runOutcomeLabel(outcome: RunOutcome | undefined): RunOutcomeLabel {
  if (outcome === undefined) return 'error';
  if (outcome.kind !== 'crashed') return outcome.kind;
  return outcome.reason === 'signal' ? 'crashed' : outcome.reason;
}
