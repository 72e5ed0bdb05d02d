import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_DELAY_MS, parsePlan } from '../../src/offline-model/directives.js';

test('a prompt without directives is echoed', () => {
  const plan = parsePlan('  what is up?\n');
  assert.deepEqual(plan.steps, [{ kind: 'say', text: 'offline model: what is up?' }]);
  assert.equal(plan.slowMs, null);
  assert.equal(plan.sleepMs, 0);
  assert.equal(plan.fail, null);
});

test('content directives become steps in prompt order, other lines are ignored', () => {
  const plan = parsePlan('please do this\nrun: echo hi\nsay:  finished  \nrecall:\nsay: again');
  assert.deepEqual(plan.steps, [
    { kind: 'run', command: 'echo hi' },
    { kind: 'say', text: 'finished' },
    { kind: 'recall' },
    { kind: 'say', text: 'again' },
  ]);
});

test('directives may be indented and need no space after the colon', () => {
  assert.deepEqual(parsePlan('   say:hi').steps, [{ kind: 'say', text: 'hi' }]);
});

test('directive names are lower case only', () => {
  assert.deepEqual(parsePlan('Say: hi').steps, [{ kind: 'say', text: 'offline model: Say: hi' }]);
});

test('windows line endings are accepted', () => {
  assert.deepEqual(parsePlan('say: a\r\nsay: b').steps, [
    { kind: 'say', text: 'a' },
    { kind: 'say', text: 'b' },
  ]);
});

test('json: reads a one-line object', () => {
  assert.deepEqual(parsePlan('json: {"a": 1, "b": [true]}').steps, [{ kind: 'json', value: { a: 1, b: [true] } }]);
});

test('json: reads an object spread over the following lines', () => {
  const plan = parsePlan('json: {\n  "a": 1,\n  "say": "x"\n}\nsay: after');
  assert.deepEqual(plan.steps, [
    { kind: 'json', value: { a: 1, say: 'x' } },
    { kind: 'say', text: 'after' },
  ]);
});

test('json: that never parses is an invalid step and the next lines are still read', () => {
  const plan = parsePlan('json: {"a": \nsay: next');
  assert.equal(plan.steps.length, 2);
  assert.equal(plan.steps[0]!.kind, 'invalid');
  assert.deepEqual(plan.steps[1], { kind: 'say', text: 'next' });
});

test('json: must be an object', () => {
  const [step] = parsePlan('json: [1, 2]').steps;
  assert.deepEqual(step, { kind: 'invalid', line: 'json: [1, 2]', reason: 'expected a JSON object' });
});

test('run: without a command is invalid', () => {
  assert.equal(parsePlan('run:   ').steps[0]!.kind, 'invalid');
});

test('slow: and sleep: set delays without adding steps', () => {
  const plan = parsePlan('slow: 250\nsleep: 40\nsay: hi');
  assert.equal(plan.slowMs, 250);
  assert.equal(plan.sleepMs, 40);
  assert.deepEqual(plan.steps, [{ kind: 'say', text: 'hi' }]);
});

test('delays are capped', () => {
  const plan = parsePlan('slow: 99999999\nsleep: 70000');
  assert.equal(plan.slowMs, MAX_DELAY_MS);
  assert.equal(plan.sleepMs, MAX_DELAY_MS);
});

test('a prompt with only modifiers is echoed whole', () => {
  const plan = parsePlan('slow: 10\ntell me a story');
  assert.equal(plan.slowMs, 10);
  assert.deepEqual(plan.steps, [{ kind: 'say', text: 'offline model: slow: 10\ntell me a story' }]);
});

test('a delay that is not a number is an invalid step', () => {
  const plan = parsePlan('slow: soon');
  assert.equal(plan.slowMs, null);
  assert.deepEqual(plan.steps, [{ kind: 'invalid', line: 'slow: soon', reason: 'expected a number of milliseconds' }]);
});

test('fail: names one of three errors, the first one wins', () => {
  assert.equal(parsePlan('fail: overloaded').fail, 'overloaded');
  assert.equal(parsePlan('fail: server').fail, 'server');
  assert.equal(parsePlan('fail: auth\nfail: server').fail, 'auth');
});

test('fail: with an unknown error is an invalid step', () => {
  const plan = parsePlan('fail: gremlins');
  assert.equal(plan.fail, null);
  assert.equal(plan.steps[0]!.kind, 'invalid');
});

test('mcp: names a tool and gives it a JSON object, which may span lines', () => {
  assert.deepEqual(parsePlan('mcp: mcp__berth__push_file {"path": "a.txt",\n "content": "hi"}\nsay: done').steps, [
    { kind: 'mcp', tool: 'mcp__berth__push_file', input: { path: 'a.txt', content: 'hi' } },
    { kind: 'say', text: 'done' },
  ]);
});

test('mcp: without arguments calls the tool with an empty object', () => {
  assert.deepEqual(parsePlan('mcp: mcp__berth__list_sessions').steps, [{ kind: 'mcp', tool: 'mcp__berth__list_sessions', input: {} }]);
});

test('mcp: without a tool name, or with arguments that are not a JSON object, is explained', () => {
  assert.deepEqual(parsePlan('mcp:').steps, [{ kind: 'invalid', line: 'mcp:', reason: 'no tool named' }]);
  assert.deepEqual(parsePlan('mcp: tool [1]').steps, [{ kind: 'invalid', line: 'mcp: tool [1]', reason: 'expected a JSON object' }]);
});
