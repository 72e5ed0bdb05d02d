import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LineReader, MAX_LINE_BYTES, truncationMarker } from '../../src/core/agents/line-reader.js';

test('lines are split across chunks, blank lines skipped, the last unterminated line flushed', () => {
  const reader = new LineReader();
  assert.deepEqual(reader.push(Buffer.from('{"a":1}\n{"b"')), [{ kind: 'line', text: '{"a":1}' }]);
  assert.deepEqual(reader.push(Buffer.from(':2}\n\n')), [{ kind: 'line', text: '{"b":2}' }]);
  assert.deepEqual(reader.push(Buffer.from('tail')), []);
  assert.deepEqual(reader.flush(), [{ kind: 'line', text: 'tail' }]);
});

test('a multi-byte character split between chunks is kept whole', () => {
  const reader = new LineReader();
  const bytes = Buffer.from('é\n');
  assert.deepEqual([...reader.push(bytes.subarray(0, 1)), ...reader.push(bytes.subarray(1))], [{ kind: 'line', text: 'é' }]);
});

test('a line over the limit becomes one truncation marker and reading continues with the next line', () => {
  const reader = new LineReader(100);
  const out = [
    ...reader.push(Buffer.from('x'.repeat(60))),
    ...reader.push(Buffer.from('y'.repeat(60))),
    ...reader.push(Buffer.from('z'.repeat(30) + '\nnext\n')),
  ];
  assert.equal(out.length, 2);
  assert.equal(out[0]!.kind, 'truncated');
  assert.equal(out[0]!.kind === 'truncated' && out[0]!.bytes, 150);
  assert.deepEqual(out[1], { kind: 'line', text: 'next' });
});

test('the 10 MiB default: a line of exactly the limit passes, one byte more is truncated', () => {
  assert.equal(MAX_LINE_BYTES, 10 * 1024 * 1024);
  const reader = new LineReader();
  const exact = reader.push(Buffer.concat([Buffer.alloc(MAX_LINE_BYTES, 0x61), Buffer.from('\n')]));
  assert.equal(exact[0]!.kind, 'line');
  const over = reader.push(Buffer.concat([Buffer.alloc(MAX_LINE_BYTES + 1, 0x61), Buffer.from('\n')]));
  assert.equal(over[0]!.kind, 'truncated');
});

test('a truncated line remembers whether it was a result line and whether it was an error, across chunk boundaries', () => {
  const reader = new LineReader(20);
  const text = `{"result":"${'r'.repeat(50)}","type":"res` ;
  const out = [...reader.push(Buffer.from(text)), ...reader.push(Buffer.from('ult","is_error":true}\n'))];
  assert.equal(out.length, 1);
  const line = out[0]!;
  assert.ok(line.kind === 'truncated' && line.resultMark && line.errorMark);
  const plain = new LineReader(5).push(Buffer.from('{"type":"assistant"}\n'))[0]!;
  assert.ok(plain.kind === 'truncated' && !plain.resultMark && !plain.errorMark);
});

test('the truncation marker is one JSON line naming the size', () => {
  assert.deepEqual(JSON.parse(truncationMarker(123)), { type: 'berth_truncated', bytes: 123, limit_bytes: MAX_LINE_BYTES });
});
