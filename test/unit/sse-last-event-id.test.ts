// The SSE id line and the Last-Event-ID a reconnecting client sends (http/sse.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatFrame, lastEventIdOf } from '../../src/http/sse.js';
import { BerthError } from '../../src/errors.js';

test('a frame with an id starts with its id line', () => {
  assert.equal(formatFrame({ type: 'output' }, 'output', 42), 'id: 42\nevent: output\ndata: {"type":"output"}\n\n');
  assert.equal(formatFrame({}, 'closed'), 'event: closed\ndata: {}\n\n');
  assert.throws(() => formatFrame({}, 'x', 1.5), TypeError);
});

test('Last-Event-ID is read from the header, else from last_event_id; an empty header is a first connection', () => {
  assert.equal(lastEventIdOf('17', undefined), 17);
  assert.equal(lastEventIdOf(' 17 ', '3'), 17, 'the header wins');
  assert.equal(lastEventIdOf(undefined, '3'), 3);
  assert.equal(lastEventIdOf(undefined, undefined), undefined);
  assert.equal(lastEventIdOf('', undefined), undefined);
  assert.equal(lastEventIdOf('0', undefined), 0);
});

test('a Last-Event-ID that is not a whole number is a 400 naming where it came from', () => {
  for (const [header, query, field] of [['abc', undefined, 'Last-Event-ID'], ['-1', undefined, 'Last-Event-ID'], [undefined, '1e3', 'last_event_id'], [undefined, '', 'last_event_id'], ['9999999999999999', undefined, 'Last-Event-ID']] as const) {
    assert.throws(() => lastEventIdOf(header, query), (error: BerthError) => error instanceof BerthError && error.status === 400 && error.message.startsWith(`${field}:`));
  }
});
