import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ContainerSlots } from '../../src/core/containers/container-slots.js';
import { BerthError } from '../../src/errors.js';

const refusedWith = (status: number, variable: string) => (error: unknown) =>
  error instanceof BerthError && error.status === status && error.message.includes(variable);

test('a caller at its own limit gets 429 naming the setting; others still get slots', () => {
  const slots = new ContainerSlots({ total: 10, perCaller: 2 });
  slots.take('alice');
  slots.take('alice');
  assert.throws(() => slots.take('alice'), refusedWith(429, 'SERVICE_MAX_CONTAINERS_PER_CALLER'));
  slots.take('bob');
  assert.equal(slots.inUse, 3);
});

test('a full server gets 503 naming the setting, and a released slot is free again', () => {
  const slots = new ContainerSlots({ total: 2, perCaller: 5 });
  const first = slots.take('alice');
  slots.take('bob');
  assert.throws(() => slots.take('carol'), refusedWith(503, 'SERVICE_MAX_CONTAINERS'));
  first.release();
  first.release(); // idempotent
  assert.equal(slots.inUse, 1);
  slots.take('carol');
});

test('waiters get freed slots in arrival order, only when their own limit allows; an abort leaves the line', async () => {
  const slots = new ContainerSlots({ total: 2, perCaller: 1 });
  const alice = slots.take('alice');
  const bob = slots.take('bob');
  const order: string[] = [];
  const controller = new AbortController();
  const aliceWaits = slots.wait('alice', new AbortController().signal).then((slot) => (order.push('alice'), slot));
  const carolAborts = slots.wait('carol', controller.signal).then(() => order.push('carol'), () => order.push('carol aborted'));
  const daveWaits = slots.wait('dave', new AbortController().signal).then((slot) => (order.push('dave'), slot));
  controller.abort();
  await carolAborts;
  bob.release(); // frees a server slot: alice is still at her own limit, so dave gets it
  await daveWaits;
  alice.release();
  await aliceWaits;
  assert.deepEqual(order, ['carol aborted', 'dave', 'alice']);
  assert.equal(slots.inUse, 2);
});

test('a pooled engine\'s slot goes to a run when the server is otherwise full, and only then', () => {
  const slots = new ContainerSlots({ total: 2, perCaller: 2 });
  const reclaimed: string[] = [];
  const pooled = slots.takeReclaimable('pool', () => reclaimed.push('a'))!;
  assert.ok(pooled);
  const first = slots.take('alice');
  assert.equal(reclaimed.length, 0, 'a free slot is used first');
  assert.equal(slots.takeReclaimable('pool', () => reclaimed.push('b')), undefined, 'the pool gets no slot from a full server');
  const second = slots.take('bob');
  assert.deepEqual(reclaimed, ['a'], 'the pooled engine gave its slot');
  assert.equal(slots.inUse, 2);
  assert.throws(() => slots.take('carol'), /server at capacity/);
  pooled.release();
  assert.equal(slots.inUse, 2, 'releasing a reclaimed slot again changes nothing');
  first.release();
  second.release();
  assert.equal(slots.inUse, 0);
});

test('an answered run frees its caller\'s share at once and the server\'s place only when its container is gone', async () => {
  const slots = new ContainerSlots({ total: 3, perCaller: 2 });
  const job = slots.take('alice');
  const run = slots.take('alice');
  assert.throws(() => slots.take('alice'), /too many containers|limit/i, 'alice is at her own limit');
  run.answered();
  assert.equal(slots.heldBy('alice'), 1);
  assert.equal(slots.inUse, 2, 'the container being removed still counts for the server');
  const agent = slots.take('alice');
  assert.throws(() => slots.take('bob'), /server at capacity/, 'the server counts the answered run until its removal');
  // A waiter of another caller gets the place once the container is gone, not at the answer.
  let bobGot = false;
  const bobWaits = slots.wait('bob', new AbortController().signal).then((slot) => ((bobGot = true), slot));
  run.answered();
  await Promise.resolve();
  assert.equal(bobGot, false, 'answered twice frees nothing more');
  run.release();
  const bob = await bobWaits;
  assert.equal(slots.heldBy('alice'), 2, 'released after answered: alice\'s count is not taken twice');
  for (const slot of [job, agent, bob]) slot.release();
  assert.equal(slots.inUse, 0);
  assert.equal(slots.heldBy('alice'), 0);
});
