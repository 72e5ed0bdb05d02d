// @berth/client's Server-Sent Events reading: frames split anywhere, comments, and the connection
// released when the reader stops early.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readSse } from '../../packages/client/src/sse.js';

function body(chunks: string[], onCancel?: () => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let index = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index < chunks.length) controller.enqueue(encoder.encode(chunks[index++]!));
      else controller.close();
    },
    cancel() {
      onCancel?.();
    },
  });
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

test('frames split across chunks, even inside a UTF-8 character, are put back together', async () => {
  const bytes = new TextEncoder().encode('data: {"content":"é"}\n\n');
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      // "é" is two bytes: split between them.
      const cut = bytes.indexOf(0xc3) + 1;
      controller.enqueue(bytes.slice(0, cut));
      controller.enqueue(bytes.slice(cut));
      controller.close();
    },
  });
  const messages = await collect(readSse(stream));
  assert.deepEqual(messages.map((m) => JSON.parse(m.data)), [{ content: 'é' }]);
});

test('event names, CRLF line ends and heartbeat comments are understood', async () => {
  const messages = await collect(
    readSse(body([': ping\n\n', 'event: turn_start\r\ndata: {"turn_id":"t"}\r\n\r\n', 'event: closed\ndata: {}\n', '\n'])),
  );
  assert.deepEqual(
    messages.map((m) => [m.event, m.data]),
    [
      ['turn_start', '{"turn_id":"t"}'],
      ['closed', '{}'],
    ],
  );
});

test('a last frame without its blank line is dropped, as SSE defines', async () => {
  const messages = await collect(readSse(body(['data: 1\n\n', 'data: 2\n'])));
  assert.deepEqual(messages.map((m) => m.data), ['1']);
});

test('leaving the loop early cancels the body, which closes the connection', async () => {
  let cancelled = false;
  const stream = body(['data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n'], () => (cancelled = true));
  for await (const message of readSse(stream)) {
    assert.equal(message.data, '1');
    break;
  }
  assert.equal(cancelled, true);
});
