// OrderedWrites (src/store/ordered-writes.ts): a key's writes land in the order they were queued whatever the
// store's delays, other keys' writes do not wait for them, a failure is reported and the queue goes on, a write
// with nothing before it starts at once, and flush() gives up on a store that hangs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OrderedWrites } from '../../src/store/ordered-writes.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('a key\'s writes land in the order queued; another key\'s do not wait for them', async () => {
  const landed: string[] = [];
  const writes = new OrderedWrites(() => assert.fail('no write fails here'));
  const write = (what: string, ms: number) => async () => {
    await sleep(ms);
    landed.push(what);
  };
  writes.add('a', 'a1', write('a1', 40));
  writes.add('a', 'a2', write('a2', 1));
  writes.add('b', 'b1', write('b1', 1));
  writes.add('a', 'a3', write('a3', 1));
  assert.equal(await writes.flush(), true);
  assert.deepEqual(landed, ['b1', 'a1', 'a2', 'a3']);
});

test('a write with nothing queued before it starts before add() returns (a synchronous store writes at once)', () => {
  let started = false;
  const writes = new OrderedWrites(() => undefined);
  writes.add('a', 'write', async () => {
    started = true;
  });
  assert.equal(started, true);
});

test('a failed write is reported with its key and name; the key\'s next writes still run', async () => {
  const failures: string[] = [];
  const landed: string[] = [];
  const writes = new OrderedWrites((key, what, error) => failures.push(`${key} ${what} ${(error as Error).message}`));
  writes.add('a', 'first', async () => {
    throw new Error('disk full');
  });
  writes.add('a', 'second', () => {
    throw new Error('thrown before any promise');
  });
  writes.add('a', 'third', async () => {
    landed.push('third');
  });
  assert.equal(await writes.flush(), true);
  assert.deepEqual(failures, ['a first disk full', 'a second thrown before any promise']);
  assert.deepEqual(landed, ['third']);
});

test('flush() answers false once its time is up when a write never ends, instead of hanging a stop', async () => {
  const writes = new OrderedWrites(() => undefined);
  writes.add('a', 'hung', () => new Promise<void>(() => undefined));
  const started = Date.now();
  assert.equal(await writes.flush(50), false);
  assert.ok(Date.now() - started < 1_000);
});

test('settled(key) waits for that key\'s queued writes only, and gives up on one that hangs', async () => {
  const landed: string[] = [];
  const writes = new OrderedWrites(() => undefined);
  writes.add('a', 'a1', async () => {
    await sleep(30);
    landed.push('a1');
  });
  writes.add('b', 'hangs', () => new Promise<void>(() => undefined));
  await writes.settled('a');
  assert.deepEqual(landed, ['a1']);
  await writes.settled('none');
  const started = Date.now();
  await writes.settled('b', 50);
  assert.ok(Date.now() - started < 1_000);
});
