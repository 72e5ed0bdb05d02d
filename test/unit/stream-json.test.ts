import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { LineSplitter, parseEngineLine } from '../../src/engine/stream-json.js';

const sample = readFileSync(new URL('../fixtures/stream-json-tooluse.jsonl', import.meta.url), 'utf8');

test('a real stream-json run yields init, streamed text and the result envelope', () => {
  const events = sample.split('\n').filter(Boolean).map(parseEngineLine);
  const init = events.find((e) => e.kind === 'init');
  assert.deepEqual(init && init.kind === 'init' && init.sessionId, '0f3a9767-ed7f-4e3d-8a0f-e662c36dce6d');
  const texts = events.flatMap((e) => (e.kind === 'text' ? [e.text] : []));
  assert.deepEqual(texts, ['Running bash.', 'tool said: hello-from-bash']);
  const result = events.find((e) => e.kind === 'result');
  assert.ok(result && result.kind === 'result');
  assert.equal(result.envelope.isError, false);
  assert.equal(result.envelope.result, 'tool said: hello-from-bash');
  assert.deepEqual(result.envelope.usage, { input_tokens: 20, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
});

test('garbage and non-object lines are ignored', () => {
  for (const line of ['not json', '[]', 'null', '42', '{"type":"assistant"}']) {
    assert.equal(parseEngineLine(line).kind, 'other');
  }
});

test('the line splitter keeps an unfinished line until its end arrives', () => {
  const splitter = new LineSplitter();
  assert.deepEqual(splitter.push('{"a":1}\n{"b"'), ['{"a":1}']);
  assert.deepEqual(splitter.push(':2}\n\n'), ['{"b":2}']);
  assert.deepEqual(splitter.push('{"c":3}'), []);
  assert.deepEqual(splitter.flush(), ['{"c":3}']);
});

test('a character split across chunks is decoded whole', () => {
  const splitter = new LineSplitter();
  const bytes = Buffer.from('{"t":"héllo"}\n');
  const cut = bytes.indexOf(0xc3) + 1;
  assert.deepEqual([...splitter.push(bytes.subarray(0, cut)), ...splitter.push(bytes.subarray(cut))], ['{"t":"héllo"}']);
});

test('an overlong line is dropped whole and the next lines still arrive', () => {
  const splitter = new LineSplitter(10);
  assert.deepEqual(splitter.push('short\n' + 'x'.repeat(25)), ['short']);
  assert.deepEqual(splitter.push('y'.repeat(25)), []);
  assert.deepEqual(splitter.push('zz\nafter\n'), ['after']);
  assert.deepEqual(splitter.push('a'.repeat(11) + '\nok\n'), ['ok']);
  assert.equal(splitter.droppedLines, 2);
});
