// The stop order of a Berth (src/composition/teardown.ts): the work first, in the order it was added, then
// the resources in reverse order of creation; a step that fails does not keep the others from running.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Teardown } from '../../src/composition/teardown.js';

function recording(): { teardown: Teardown; ran: string[]; errors: unknown[] } {
  const errors: unknown[] = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => errors.push(JSON.parse(line)) });
  return { teardown: new Teardown(logger), ran: [], errors };
}

test('the work stops first, in the order it was added (endWorkFirst ahead of it); then resources, the latest first, releaseLast at the end', async () => {
  const { teardown, ran } = recording();
  const step = (name: string) => async () => void ran.push(name);
  teardown.releaseLast(step('tracing'));
  teardown.release(step('podman'));
  teardown.release(step('stores'));
  teardown.endWork(step('runs'));
  teardown.release(step('gateway'));
  teardown.endWorkFirst(step('grants kept'));
  teardown.endWork(step('api'));
  await teardown.stop();
  assert.deepEqual(ran, ['grants kept', 'runs', 'api', 'gateway', 'stores', 'podman', 'tracing']);
});

test('a failing step is logged and the steps after it still run', async () => {
  const { teardown, ran, errors } = recording();
  teardown.release(async () => void ran.push('first created'));
  teardown.release(async () => {
    throw new Error('close failed');
  });
  teardown.endWork(async () => {
    throw new Error('drain failed');
  });
  await teardown.stop();
  assert.deepEqual(ran, ['first created']);
  assert.deepEqual(errors.map((entry) => (entry as { err: { message: string } }).err.message), ['drain failed', 'close failed']);
});

test('each step runs once: a second stop (after a failed start stopped it) runs nothing again', async () => {
  const { teardown, ran } = recording();
  teardown.release(async () => void ran.push('released'));
  await teardown.stop();
  await teardown.stop();
  assert.deepEqual(ran, ['released']);
});
