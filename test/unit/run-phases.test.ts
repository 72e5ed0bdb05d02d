import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunPhases, RUN_PHASES } from '../../src/core/run-phases.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('measure records a phase also when its work throws', async () => {
  const phases = new RunPhases();
  await assert.rejects(phases.measure('create', async () => {
    await pause(5);
    throw new Error('refused');
  }));
  assert.ok(phases.toJSON().create! >= 4);
});

test('mark and end time event-bounded phases one after another', async () => {
  const phases = new RunPhases();
  const started = performance.now();
  phases.mark();
  await pause(10);
  phases.end('first_output');
  await pause(10);
  phases.end('engine_exit');
  const elapsed = performance.now() - started;
  const json = phases.toJSON();
  assert.ok(json.first_output! >= 9 && json.engine_exit! >= 9, JSON.stringify(json));
  // One after another: together they fit in the time the test measured around them (no phase counted from
  // the first mark, none twice), whatever the machine's load made that time.
  assert.ok(json.first_output! + json.engine_exit! <= elapsed + 2, `${JSON.stringify(json)} within ${elapsed} ms`);
});

test('the JSON lists only reached phases, in phase order', async () => {
  const phases = new RunPhases();
  await phases.measure('remove', async () => undefined);
  await phases.measure('validate', async () => undefined);
  assert.deepEqual(Object.keys(phases.toJSON()), ['validate', 'remove']);
  assert.equal(phases.has('start'), false);
  assert.ok(RUN_PHASES.indexOf('validate') < RUN_PHASES.indexOf('remove'));
});
