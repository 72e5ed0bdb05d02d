// When the pool starts engines and how many (core/pool/refill-schedule.ts), on fake timers, a fake CPU meter
// and a fake pool: no test here waits for real time.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { REFILL_BUSY_LIMIT, REFILL_MAX_POSTPONED, RETRY_MS, RefillSchedule, type PoolCounts, type Timer } from '../../src/core/pool/refill-schedule.js';
import type { CpuReading } from '../../src/runtime/host-cpu.js';

/** Timers that fire only when told. */
class FakeTimers {
  private pending: { readonly run: () => void; readonly ms: number; cancelled: boolean }[] = [];

  readonly timer: Timer = (run, ms) => {
    const entry = { run, ms, cancelled: false };
    this.pending.push(entry);
    return () => {
      entry.cancelled = true;
    };
  };

  /** The delays of the timers set and not cancelled. */
  due(): number[] {
    return this.pending.filter((entry) => !entry.cancelled).map((entry) => entry.ms);
  }

  /** Fires the timers due now; timers they set wait for the next call. */
  fire(): void {
    for (const entry of this.pending.splice(0)) if (!entry.cancelled) entry.run();
  }
}

function setUp(options: { readonly size?: number; readonly counts?: Partial<PoolCounts>; readonly busy?: number } = {}) {
  const timers = new FakeTimers();
  const counts: { ready: number; starting: number; waiting: number } = { ready: 0, starting: 0, waiting: 0, ...options.counts };
  const started: number[] = [];
  const cpu = {
    busy: options.busy ?? 0,
    /** Each reading is numbered, so that a test sees which one a busy fraction was asked since. */
    readings: 0,
    askedSince: [] as number[],
  };
  const schedule = new RefillSchedule({
    settings: { size: options.size ?? 3, maxAgeMs: 60_000, refillPauseMs: 500 },
    cpu: {
      read: (): CpuReading => ({ busyMs: ++cpu.readings, totalMs: 0 }),
      busySince: (reading) => {
        cpu.askedSince.push(reading.busyMs);
        return cpu.busy;
      },
    },
    counts: () => ({ ...counts }),
    start: (count) => {
      started.push(count);
      counts.starting += count;
    },
    timer: timers.timer,
  });
  return { schedule, timers, counts, started, cpu };
}

describe('fill', () => {
  it('starts every engine the pool lacks at once, counting those being started', () => {
    const { schedule, started } = setUp({ size: 5, counts: { ready: 1, starting: 2 } });
    schedule.fill();
    assert.deepEqual(started, [2]);
  });

  it('starts nothing when the pool is full or fuller', () => {
    for (const counts of [{ ready: 3 }, { starting: 3 }, { ready: 2, starting: 1 }, { ready: 4, starting: 1 }]) {
      const { schedule, started } = setUp({ size: 3, counts });
      schedule.fill();
      assert.deepEqual(started, [], JSON.stringify(counts));
    }
  });

  it('a pool of size 0 starts nothing', () => {
    const { schedule, started } = setUp({ size: 0 });
    schedule.fill();
    assert.deepEqual(started, []);
  });

  it('starts nothing once closed', () => {
    const { schedule, started } = setUp();
    schedule.close();
    schedule.fill();
    assert.deepEqual(started, []);
  });
});

describe('afterClaim', () => {
  it('refills only once the pause has passed, with the host idle', () => {
    const { schedule, timers, started, counts } = setUp({ size: 3, busy: 0.1 });
    counts.ready = 1;
    schedule.afterClaim();
    assert.deepEqual(started, [], 'nothing starts at the claim');
    assert.deepEqual(timers.due(), [500], 'one pause of SERVICE_POOL_REFILL_PAUSE');
    timers.fire();
    assert.deepEqual(started, [2]);
    assert.deepEqual(timers.due(), []);
  });

  it('judges the host by its CPUs during the pause itself', () => {
    const { schedule, timers, cpu } = setUp({ busy: 0.9 });
    schedule.afterClaim();
    assert.equal(cpu.readings, 1, 'read when the pause begins');
    timers.fire();
    assert.deepEqual(cpu.askedSince, [1]);
    timers.fire();
    assert.deepEqual(cpu.askedSince, [1, 2], 'each postponed pause measured from its own start');
  });

  it('a host busy more than half the pause postpones the refill; exactly half does not', () => {
    const busier = setUp({ busy: REFILL_BUSY_LIMIT + 0.01 });
    busier.schedule.afterClaim();
    busier.timers.fire();
    assert.deepEqual(busier.started, []);
    assert.deepEqual(busier.timers.due(), [500], 'postponed by another pause');

    const half = setUp({ busy: REFILL_BUSY_LIMIT });
    half.schedule.afterClaim();
    half.timers.fire();
    assert.deepEqual(half.started, [3]);
  });

  it(`a host kept busy without claims postpones the refill ${REFILL_MAX_POSTPONED} pauses, no more`, () => {
    const { schedule, timers, started } = setUp({ busy: 1 });
    schedule.afterClaim();
    for (let pause = 1; pause <= REFILL_MAX_POSTPONED; pause++) {
      timers.fire();
      assert.deepEqual(started, [], `pause ${pause}`);
    }
    timers.fire();
    assert.deepEqual(started, [3]);
    assert.deepEqual(timers.due(), []);
  });

  it('a claim starts the pause and the count of postponements again', () => {
    const { schedule, timers, started } = setUp({ busy: 1 });
    schedule.afterClaim();
    for (let pause = 0; pause < REFILL_MAX_POSTPONED; pause++) timers.fire();
    schedule.afterClaim();
    assert.deepEqual(timers.due(), [500], 'the pause waiting before the claim is cancelled');
    for (let pause = 0; pause < REFILL_MAX_POSTPONED; pause++) timers.fire();
    assert.deepEqual(started, [], 'postponed again as often as after the first claim');
    timers.fire();
    assert.deepEqual(started, [3]);
  });
});

describe('retryLater', () => {
  it('fills the pool again after RETRY_MS, one retry due at a time', () => {
    const { schedule, timers, started } = setUp({ size: 2 });
    schedule.retryLater();
    schedule.retryLater();
    assert.deepEqual(timers.due(), [RETRY_MS]);
    timers.fire();
    assert.deepEqual(started, [2]);
    schedule.retryLater();
    assert.deepEqual(timers.due(), [RETRY_MS], 'a retry done, the next failure retries again');
  });
});

describe('close', () => {
  it('cancels the pause and the retry due, and sets no timer afterwards', () => {
    const { schedule, timers, started } = setUp();
    schedule.afterClaim();
    schedule.retryLater();
    schedule.close();
    assert.deepEqual(timers.due(), []);
    schedule.afterClaim();
    schedule.retryLater();
    assert.deepEqual(timers.due(), []);
    timers.fire();
    assert.deepEqual(started, []);
  });
});

describe('startsForClaim', () => {
  const cases: [Partial<PoolCounts>, boolean, string][] = [
    [{}, true, 'an empty pool: the run starts the engine it waits for'],
    [{ starting: 1 }, false, 'a start no claim waits for: the run waits for it'],
    [{ starting: 1, waiting: 1 }, true, 'every start promised to another claim'],
    [{ starting: 2, waiting: 1 }, false, 'one start still free'],
    [{ ready: 1, starting: 1, waiting: 1 }, true, 'below the size with every start promised'],
    [{ ready: 2, starting: 1, waiting: 1 }, false, 'the pool is full: the run starts its own container, not the pool\'s'],
    [{ ready: 3 }, false, 'full of ready engines (stale ones, as the claim found)'],
  ];
  for (const [counts, expected, why] of cases) {
    it(`${expected ? 'starts' : 'does not start'}: ${why}`, () => {
      assert.equal(setUp({ size: 3, counts }).schedule.startsForClaim(), expected);
    });
  }

  it('never once closed', () => {
    const { schedule } = setUp();
    schedule.close();
    assert.equal(schedule.startsForClaim(), false);
  });
});

describe('expired', () => {
  it('an engine older than SERVICE_POOL_MAX_AGE is expired, one exactly that old is not', () => {
    const { schedule } = setUp();
    assert.equal(schedule.expired(1_000, 1_000), false);
    assert.equal(schedule.expired(1_000, 61_000), false);
    assert.equal(schedule.expired(1_000, 61_001), true);
  });
});
