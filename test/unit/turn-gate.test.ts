import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TurnGate } from '../../src/core/runs/turn-gate.js';

function gate() {
  let now = 0;
  const turns = new TurnGate({ quietMs: 60, maxWaitMs: 1_000, now: () => now });
  return { turns, advance: (ms: number) => (now += ms) };
}

test('a tear-down waits while one turn runs and until no turn has run for the quiet window', () => {
  const { turns, advance } = gate();
  advance(100);
  assert.equal(turns.open(), true, 'no turn for a while: at once');
  const end = turns.begin();
  assert.equal(turns.open(), false, 'a lone turn in progress');
  advance(500);
  assert.equal(turns.open(), false);
  end();
  assert.equal(turns.open(), false, 'the next sequential run comes within the window');
  advance(30);
  const next = turns.begin();
  advance(40);
  next();
  advance(59);
  assert.equal(turns.open(), false);
  advance(1);
  assert.equal(turns.open(), true, 'quiet for the window');
});

test('two turns at once open the gate: a busy host gains nothing from waiting', () => {
  const { turns } = gate();
  const first = turns.begin();
  assert.equal(turns.open(), false);
  const second = turns.begin();
  assert.equal(turns.open(), true);
  second();
  second();
  assert.equal(turns.inProgress, 1, 'ending a turn twice counts once');
  first();
  assert.equal(turns.inProgress, 0);
});

test('quiet() gives up after the longest wait', async () => {
  const turns = new TurnGate({ quietMs: 10, maxWaitMs: 50 });
  turns.begin();
  const started = performance.now();
  await turns.quiet();
  assert.ok(performance.now() - started >= 45, 'waited about the longest wait');
});
