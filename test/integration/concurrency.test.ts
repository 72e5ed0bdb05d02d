// Many callers at once: 48 runs at concurrency 8, sync runs mixed with async jobs and streams, against a
// real Berth on real Podman. Every run must succeed (under Podman 4.3, containers sharing an image mount
// used to fail one start in four here), leave no container, and explain where its time went.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { mixedModes, percentile, runLoad } from '../support/load.js';
import { CONTAINER_PHASES, OPTIONAL_PHASES, RUN_PHASES } from '../../src/core/run-phases.js';

const TOTAL = 48;
const CONCURRENCY = 8;
// A run's container is made for it (create, start) or taken from the pool (claim): either set, not both.
const CONTAINER_PHASE_NAMES = new Set<string>([...CONTAINER_PHASES.created, ...CONTAINER_PHASES.pooled]);
const EVERY_RUN_PHASE = RUN_PHASES.filter((phase) => !OPTIONAL_PHASES.has(phase) && !CONTAINER_PHASE_NAMES.has(phase));

describe('concurrent load', () => {
  let t: TestBerth;
  const finished: Record<string, unknown>[] = [];
  before(async () => {
    t = await startTestBerth(
      // Async jobs queue under SERVICE_MAX_CONCURRENT_RUNS; let all eight run at once as sync runs do.
      { SERVICE_LOG_LEVEL: 'info', SERVICE_MAX_CONCURRENT_RUNS: String(CONCURRENCY) },
      { onLog: (record) => record.msg === 'run finished' && finished.push(record) },
    );
  });
  after(async () => {
    await t.stop();
  });

  test(`${TOTAL} mixed runs at concurrency ${CONCURRENCY} all succeed, leave nothing and log their phases`, async (ctx) => {
    const results = await runLoad({ url: t.url, total: TOTAL, concurrency: CONCURRENCY, modeOf: mixedModes });
    const failures = results.filter((r) => !r.ok);
    assert.deepEqual(failures, [], `${failures.length} of ${TOTAL} runs failed`);
    for (const result of results) assert.equal(result.output, `load ${result.index}`, `run ${result.index} (${result.mode}) answered its own prompt`);
    assert.deepEqual(await t.leftovers(), [], 'no container may be left after the load');

    assert.equal(finished.length, TOTAL, 'one "run finished" log line per run');
    for (const record of finished) {
      const phases = record.phases as Record<string, number>;
      assert.deepEqual(
        EVERY_RUN_PHASE.filter((phase) => typeof phases[phase] !== 'number'),
        [],
        `run ${String(record.runId)} logged phases ${JSON.stringify(phases)}`,
      );
      if (record.mode === 'async') assert.equal(typeof phases.queue, 'number', 'an async run logs its queue time');
      const made = CONTAINER_PHASES.created.every((phase) => typeof phases[phase] === 'number');
      const pooled = typeof phases.claim === 'number' && phases.create === undefined;
      assert.ok(made || pooled, `run ${String(record.runId)} logged neither create+start nor a claim: ${JSON.stringify(phases)}`);
    }

    const metrics = await (await fetch(t.berth.metricsUrl)).text();
    for (const phase of EVERY_RUN_PHASE) {
      const count = new RegExp(`^berth_run_phase_duration_seconds_count\\{phase="${phase}"\\} (\\d+)$`, 'm').exec(metrics);
      assert.equal(Number(count?.[1]), TOTAL, `the ${phase} histogram counted every run`);
    }
    const ms = results.map((r) => r.ms);
    const summary = [`end to end p50 ${percentile(ms, 50).toFixed(0)} ms, p95 ${percentile(ms, 95).toFixed(0)} ms, max ${Math.max(...ms).toFixed(0)} ms`];
    for (const phase of RUN_PHASES) {
      const values = finished.map((record) => (record.phases as Record<string, number>)[phase]).filter((v): v is number => v !== undefined);
      if (values.length > 0) summary.push(`${phase} p50 ${percentile(values, 50).toFixed(0)} p95 ${percentile(values, 95).toFixed(0)} max ${Math.max(...values).toFixed(0)}`);
    }
    ctx.diagnostic(summary.join('; '));
    process.stderr.write(`concurrency ${CONCURRENCY}: ${summary.join('\n  ')}\n`);
  });
});
