// Answered runs still ending: waiters wait for the rest of their key only, and a failed rest does not fail them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Settling } from '../../src/core/settling.js';

/** A promise with its resolve and reject at hand. */
function deferred() {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Whether `promise` has settled by the time queued callbacks have run. */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('settling', () => {
  it('a waiter on a key waits for that key\'s rest, not for another key\'s', async () => {
    const settling = new Settling();
    const a = deferred();
    const b = deferred();
    settling.add('a', a.promise);
    settling.add('b', b.promise);
    const waitingA = settling.settled('a');
    assert.equal(await isSettled(waitingA), false);
    assert.equal(await isSettled(settling.settled('c')), true, 'a key with nothing pending does not wait');
    a.resolve();
    assert.equal(await isSettled(waitingA), true);
    const waitingAll = settling.settled();
    assert.equal(await isSettled(waitingAll), false, 'without a key it waits for every key');
    b.resolve();
    assert.equal(await isSettled(waitingAll), true);
  });

  it('a rest that fails settles its waiters without an error', async () => {
    const settling = new Settling();
    const failing = deferred();
    settling.add('a', failing.promise);
    const waiting = settling.settled('a');
    failing.reject(new Error('engine crashed'));
    await waiting;
  });
});
