import { test } from 'node:test';
import assert from 'node:assert/strict';
import { interpolate, interpolateDocument, InterpolationError } from '../../src/core/compose-file/interpolation.js';

const vars = new Map([
  ['SET', 'value'],
  ['EMPTY', ''],
  ['PORT', '6379'],
]);
const run = (text: string) => interpolate(text, vars, 'x');

test('plain and braced variables, unset ones empty', () => {
  assert.equal(run('$SET-${SET}'), 'value-value');
  assert.equal(run('a${UNSET}b$UNSET'), 'ab');
  assert.equal(run('redis://cache:$PORT/0'), 'redis://cache:6379/0');
});

test('defaults: ":-" for unset or empty, "-" for unset only', () => {
  assert.equal(run('${UNSET:-d}'), 'd');
  assert.equal(run('${EMPTY:-d}'), 'd');
  assert.equal(run('${EMPTY-d}'), '');
  assert.equal(run('${UNSET-d}'), 'd');
  assert.equal(run('${SET:-d}'), 'value');
});

test('replacements: ":+" when set and non-empty, "+" when set', () => {
  assert.equal(run('${SET:+r}'), 'r');
  assert.equal(run('${EMPTY:+r}'), '');
  assert.equal(run('${EMPTY+r}'), 'r');
  assert.equal(run('${UNSET+r}'), '');
});

test('required variables fail with their message', () => {
  assert.throws(() => run('${UNSET:?give a password}'), /x: required variable UNSET is missing: give a password/);
  assert.throws(() => run('${EMPTY:?}'), /required variable EMPTY is empty/);
  assert.equal(run('${EMPTY?}'), '');
});

test('nested expressions in defaults, and $$ for a literal dollar', () => {
  assert.equal(run('${UNSET:-${SET}}'), 'value');
  assert.equal(run('${UNSET:-a-${UNSET2:-b}-c}'), 'a-b-c');
  assert.equal(run('cost $$5 and $$SET'), 'cost $5 and $SET');
  assert.equal(run('a $ b'), 'a $ b');
});

test('malformed expressions are errors naming the place', () => {
  assert.throws(() => run('${'), InterpolationError);
  assert.throws(() => run('${SET'), /no closing/);
  assert.throws(() => run('${1X}'), /variable name/);
  assert.throws(() => run('${SET*x}'), /invalid interpolation format/);
});

test('documents: values interpolated, keys kept', () => {
  const doc = interpolateDocument({ services: { '$SET': { image: 'img:${PORT}', command: ['a', '$SET', 1, true, null] } } }, vars);
  assert.deepEqual(doc, { services: { '$SET': { image: 'img:6379', command: ['a', 'value', 1, true, null] } } });
  assert.throws(() => interpolateDocument({ services: { db: { environment: { P: '${X:?set X}' } } } }, vars), /services\.db\.environment\.P: required variable X/);
});
