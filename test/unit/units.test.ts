import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCpus, parseDuration, parseMemory } from '../../src/units.js';

test('durations', () => {
  assert.equal(parseDuration('5s'), 5_000);
  assert.equal(parseDuration('5m'), 300_000);
  assert.equal(parseDuration('1h30m'), 5_400_000);
  assert.equal(parseDuration('250ms'), 250);
  for (const bad of ['', '0s', '5', '-5m', '5 m', '5M', '1.5h', 'm', '5mm', '99999999999h']) assert.equal(parseDuration(bad), undefined, bad);
});

test('memory sizes', () => {
  assert.equal(parseMemory('512m'), 512 * 1024 ** 2);
  assert.equal(parseMemory('2g'), 2 * 1024 ** 3);
  assert.equal(parseMemory('2G'), 2 * 1024 ** 3);
  assert.equal(parseMemory('512mb'), 512 * 1024 ** 2);
  for (const bad of ['', '0m', '512', '-1g', '1.5g', '512x', 'g', '9999999999999999t']) assert.equal(parseMemory(bad), undefined, bad);
});

test('cpus', () => {
  assert.equal(parseCpus('0.5'), 0.5);
  assert.equal(parseCpus('2'), 2);
  for (const bad of ['', '0', '0.0', '-1', '1e3', '0.0001', 'two', '1,5']) assert.equal(parseCpus(bad), undefined, bad);
});
