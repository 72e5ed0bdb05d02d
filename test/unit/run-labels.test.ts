// A run's mode and outcome are said in three places that must agree: what the run service emits
// (runOutcomeLabel), the series /metrics creates at zero, and docs/auth.md's metrics table.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { RUN_MODES, RUN_OUTCOMES, runOutcomeLabel } from '../../src/core/runs/run-labels.js';
import type { RunOutcome } from '../../src/core/runs/run-executor.js';
import type { ResultEnvelope } from '../../src/engine/stream-json.js';
import { createMetrics } from '../../src/metrics/metrics.js';

type CrashReason = Extract<RunOutcome, { kind: 'crashed' }>['reason'];
// A Record over the type: a crash reason added to the executor without a case here does not typecheck.
const CRASH_REASONS = Object.keys({ oom: 0, timeout: 0, signal: 0, cancelled: 0 } satisfies Record<CrashReason, 0>) as CrashReason[];

const envelope: ResultEnvelope = {
  subtype: 'success', isError: false, result: '', sessionId: 's', totalCostUsd: 0, usage: undefined, structuredOutput: undefined, apiErrorStatus: undefined, model: undefined,
};

/** Every kind of end a run can have, and a run that threw before it had one. */
const EVERY_END: (RunOutcome | undefined)[] = [
  { kind: 'completed', envelope, rawOutput: '' },
  { kind: 'failed', message: 'failed', envelope: undefined, rawOutput: '' },
  ...CRASH_REASONS.map((reason) => ({ kind: 'crashed' as const, reason, exitCode: 137, signal: 'SIGKILL', partialOutput: '', taskCompleted: false })),
  undefined,
];

const emitted = new Set(EVERY_END.map(runOutcomeLabel));

/** The values listed for `label` in docs/auth.md's row of berth_runs_total. */
function documented(label: 'mode' | 'outcome'): string[] {
  const doc = readFileSync(resolve(import.meta.dirname, '..', '..', 'docs', 'auth.md'), 'utf8');
  const row = doc.split('\n').find((line) => line.startsWith('| `berth_runs_total`'));
  assert.ok(row, 'docs/auth.md has a row for berth_runs_total');
  const list = new RegExp(`\`${label}\` \\(([^)]*)\\)`).exec(row)?.[1];
  assert.ok(list, `the row lists the ${label} values`);
  return [...list.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
}

async function precreated(): Promise<{ mode: string; outcome: string }[]> {
  const runs = (await createMetrics().registry.getMetricsAsJSON()).find((metric) => metric.name === 'berth_runs_total');
  assert.ok(runs, 'berth_runs_total is registered');
  return runs.values.map((value) => ({ mode: String(value.labels['mode']), outcome: String(value.labels['outcome']) }));
}

describe('run modes and outcomes', () => {
  it('emits every listed outcome and nothing else: no series waits for an outcome that never comes', () => {
    assert.deepEqual([...emitted].sort(), [...RUN_OUTCOMES].sort());
  });

  it('names a run that threw before the engine had an outcome "error", a cancellation "cancelled"', () => {
    assert.equal(runOutcomeLabel(undefined), 'error');
    assert.equal(runOutcomeLabel(EVERY_END.find((end) => end?.kind === 'crashed' && end.reason === 'cancelled')), 'cancelled');
    assert.equal(runOutcomeLabel(EVERY_END.find((end) => end?.kind === 'crashed' && end.reason === 'signal')), 'crashed');
  });

  it('pre-creates a series at zero for every mode and every emitted outcome', async () => {
    const series = await precreated();
    for (const mode of RUN_MODES) {
      for (const outcome of emitted) assert.ok(series.some((s) => s.mode === mode && s.outcome === outcome), `${mode}/${outcome}`);
    }
    assert.equal(series.length, RUN_MODES.length * emitted.size, 'no series for an outcome that is never emitted');
  });

  it('documents exactly the modes and outcomes it emits', () => {
    assert.deepEqual(documented('mode'), [...RUN_MODES]);
    assert.deepEqual(documented('outcome').sort(), [...emitted].sort());
  });
});
