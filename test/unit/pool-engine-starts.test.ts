// The CPU weight of the pool's engine starts: a refill's start is raised to a run's weight once it is ready,
// or as soon as a claim waits for it (oldest first, as many as claims wait), never twice, and never before
// its container has started (Podman cannot update a container that is only created).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EngineStarts } from '../../src/core/pool/engine-starts.js';

function recorder(options: { readonly fail?: boolean } = {}) {
  const raised: string[] = [];
  const starts = new EngineStarts(async (containerId) => {
    raised.push(containerId);
    if (options.fail) throw new Error('podman update failed');
  });
  return { starts, raised };
}

test('a refill\'s start is raised once, when its engine is ready', async () => {
  const { starts, raised } = recorder();
  const start = starts.begin('waiting');
  assert.equal(start.createdWith, 'waiting');
  await start.started('c1');
  assert.deepEqual(raised, []);
  await start.ready();
  await start.ready();
  assert.deepEqual(raised, ['c1']);
});

test('a start made for a waiting run is created at its weight and never raised', async () => {
  const { starts, raised } = recorder();
  const start = starts.begin('claimed');
  assert.equal(start.createdWith, 'claimed');
  await start.started('c1');
  await start.ready();
  starts.promote(1);
  assert.deepEqual(raised, []);
});

test('a claim that waits raises the oldest start at once, and its readiness raises nothing more', async () => {
  const { starts, raised } = recorder();
  const older = starts.begin('waiting');
  const newer = starts.begin('waiting');
  await older.started('old');
  await newer.started('new');
  starts.promote(1);
  assert.deepEqual(raised, ['old']);
  await older.ready();
  assert.deepEqual(raised, ['old'], 'not raised twice');
  await newer.ready();
  assert.deepEqual(raised, ['old', 'new']);
});

test('as many starts are raised as claims wait, counting those already at a run\'s weight', async () => {
  const { starts, raised } = recorder();
  const own = starts.begin('claimed');
  const a = starts.begin('waiting');
  const b = starts.begin('waiting');
  const c = starts.begin('waiting');
  for (const [start, id] of [[own, 'own'], [a, 'a'], [b, 'b'], [c, 'c']] as const) await start.started(id);
  starts.promote(2);
  assert.deepEqual(raised, ['a']);
  starts.promote(3);
  assert.deepEqual(raised, ['a', 'b']);
  starts.promote(3);
  assert.deepEqual(raised, ['a', 'b'], 'nothing more owed');
});

test('a start promoted before its container started is raised when it starts, not before', async () => {
  const { starts, raised } = recorder();
  const start = starts.begin('waiting');
  starts.promote(1);
  assert.deepEqual(raised, [], 'no container to update yet');
  await start.started('c1');
  assert.deepEqual(raised, ['c1']);
  await start.ready();
  assert.deepEqual(raised, ['c1']);
});

test('an ended start no longer counts: a later claim raises the next one', async () => {
  const { starts, raised } = recorder();
  const first = starts.begin('waiting');
  const second = starts.begin('waiting');
  await first.started('first');
  await second.started('second');
  starts.promote(1);
  first.end();
  starts.promote(1);
  assert.deepEqual(raised, ['first', 'second']);
});

test('a failed raise by a claim is not unhandled; the engine\'s readiness then fails with it', async () => {
  const { starts } = recorder({ fail: true });
  const start = starts.begin('waiting');
  await start.started('c1');
  starts.promote(1);
  await new Promise((resolve) => setImmediate(resolve));
  await assert.rejects(start.ready(), /podman update failed/);
});
