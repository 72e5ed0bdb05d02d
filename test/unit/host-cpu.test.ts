// The host CPU meter the pool's refill asks: a fraction of all CPUs' time, higher while this process
// burns CPU than while it sleeps.
import assert from 'node:assert/strict';
import { cpus } from 'node:os';
import { test } from 'node:test';
import { hostCpu } from '../../src/runtime/host-cpu.js';

test('reads busy time as a fraction of all CPUs\' time', () => {
  const before = hostCpu.read();
  assert.ok(before.busyMs > 0 && before.totalMs > before.busyMs);
  const burning = hostCpu.read();
  const until = Date.now() + 300;
  while (Date.now() < until) Math.sqrt(Math.random());
  const busy = hostCpu.busySince(burning);
  // One of the host's CPUs was busy the whole time (the kernel counts in 10 ms ticks).
  assert.ok(busy >= 0.8 / cpus().length && busy <= 1, `busy ${busy}`);
});
