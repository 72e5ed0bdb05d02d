import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OutputTail } from '../../src/core/runs/output-tail.js';

test('keeps every line while under budget', () => {
  const tail = new OutputTail(100);
  tail.push('a');
  tail.push('b');
  assert.equal(tail.text(), 'a\nb\n');
  assert.equal(tail.truncated, false);
});

test('drops the oldest lines past the budget and says so', () => {
  const tail = new OutputTail(20);
  for (let i = 0; i < 10_000; i++) tail.push(`line-${i}`);
  assert.equal(tail.truncated, true);
  assert.ok(tail.text().length <= 20 + 12);
  assert.ok(tail.text().endsWith('line-9999\n'));
});

test('keeps the last line even when it alone is over budget', () => {
  const tail = new OutputTail(5);
  tail.push('x'.repeat(50));
  assert.equal(tail.count, 1);
});
