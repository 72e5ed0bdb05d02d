// RunQueue: at most `limit` tasks at once, started in the order they were queued.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RunQueue } from '../../src/core/jobs/run-queue.js';

/** A task the test ends by hand, recording when it started. */
function gate(started: string[], key: string) {
  let open!: () => void;
  const done = new Promise<void>((resolve) => (open = resolve));
  return { task: async () => { started.push(key); await done; }, open };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('RunQueue', () => {
  it('runs no more than the limit at once', async () => {
    const started: string[] = [];
    const queue = new RunQueue(2);
    const gates = ['a', 'b', 'c', 'd'].map((key) => ({ key, ...gate(started, key) }));
    for (const g of gates) queue.enqueue(g.key, g.task);
    await tick();
    assert.deepEqual(started, ['a', 'b']);
    assert.equal(queue.runningCount, 2);
    assert.deepEqual(queue.waitingKeys, ['c', 'd']);
  });

  it('starts waiting tasks in the order they were queued as slots free up', async () => {
    const started: string[] = [];
    const queue = new RunQueue(1);
    const gates = ['a', 'b', 'c'].map((key) => ({ key, ...gate(started, key) }));
    for (const g of gates) queue.enqueue(g.key, g.task);
    await tick();
    assert.deepEqual(started, ['a']);
    gates[0]!.open();
    await tick();
    assert.deepEqual(started, ['a', 'b']);
    gates[1]!.open();
    await tick();
    assert.deepEqual(started, ['a', 'b', 'c']);
  });

  it('frees the slot of a task that throws and reports the error', async () => {
    const errors: string[] = [];
    const started: string[] = [];
    const queue = new RunQueue(1, (key) => errors.push(key));
    queue.enqueue('bad', async () => { throw new Error('boom'); });
    const next = gate(started, 'next');
    queue.enqueue('next', next.task);
    await tick();
    await tick();
    assert.deepEqual(errors, ['bad']);
    assert.deepEqual(started, ['next']);
  });

  it('never starts a task removed while it waited', async () => {
    const started: string[] = [];
    const queue = new RunQueue(1);
    const first = gate(started, 'a');
    queue.enqueue('a', first.task);
    queue.enqueue('b', gate(started, 'b').task);
    queue.enqueue('c', gate(started, 'c').task);
    assert.equal(queue.remove('b'), true);
    assert.equal(queue.remove('a'), false, 'a running task is not waiting');
    first.open();
    await tick();
    assert.deepEqual(started, ['a', 'c']);
  });

  it('starts nothing after close and hands back what was waiting', async () => {
    const started: string[] = [];
    const queue = new RunQueue(1);
    const first = gate(started, 'a');
    queue.enqueue('a', first.task);
    queue.enqueue('b', gate(started, 'b').task);
    queue.enqueue('c', gate(started, 'c').task);
    assert.deepEqual(queue.close(), ['b', 'c']);
    first.open();
    await tick();
    assert.deepEqual(started, ['a']);
    assert.throws(() => queue.enqueue('d', async () => undefined), /closed/);
  });

  it('refuses a limit below one', () => {
    assert.throws(() => new RunQueue(0), RangeError);
  });
});
