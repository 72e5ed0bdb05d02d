// @berth/client's waiting arithmetic: exponential back-off, Retry-After, abortable pauses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, delay, retryAfterMs } from '../../packages/client/src/delay.js';

test('back-off doubles from its first wait and stops growing at its cap', () => {
  const waits = [0, 1, 2, 3, 4, 5].map((attempt) => backoffDelay(attempt, { initial: 500, max: 3000 }));
  assert.deepEqual(waits, [500, 1000, 2000, 3000, 3000, 3000]);
});

test('back-off grows by the given factor', () => {
  const waits = [0, 1, 2].map((attempt) => backoffDelay(attempt, { initial: 100, max: 10_000, factor: 1.5 }));
  assert.deepEqual(waits, [100, 150, 225]);
});

test('jitter takes at most its fraction off a wait', () => {
  assert.equal(backoffDelay(2, { initial: 100, max: 10_000, jitter: 0.5, random: () => 0 }), 400);
  assert.equal(backoffDelay(2, { initial: 100, max: 10_000, jitter: 0.5, random: () => 0.999999 }), 200);
});

test('Retry-After is read as seconds or as an HTTP date; anything else is absent', () => {
  assert.equal(retryAfterMs('3'), 3000);
  assert.equal(retryAfterMs(' 0 '), 0);
  const now = Date.parse('2030-01-01T00:00:00Z');
  assert.equal(retryAfterMs('Tue, 01 Jan 2030 00:00:05 GMT', now), 5000);
  assert.equal(retryAfterMs('Tue, 31 Dec 2029 23:59:00 GMT', now), 0);
  assert.equal(retryAfterMs(null), undefined);
  assert.equal(retryAfterMs('soon'), undefined);
});

test('a pause ends at once when its signal is aborted, with the signal reason', async () => {
  const controller = new AbortController();
  const started = Date.now();
  const paused = delay(60_000, controller.signal);
  setTimeout(() => controller.abort(), 20);
  await assert.rejects(paused, { name: 'AbortError' });
  assert.ok(Date.now() - started < 5000);
  await assert.rejects(delay(10, AbortSignal.abort(new Error('gone'))), /gone/);
});
