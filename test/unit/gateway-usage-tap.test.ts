// The usage tap (src/gateway/usage-tap.ts): token counts read from a copy of a Messages API answer, fed in
// chunks of any size. Streams are the events of a real engine session (/work/shared/engine-samples, the
// stream_event lines are the API's events as the engine received them) and the offline model's answers.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { startOfflineModel } from '../../src/offline-model/server.js';
import { UsageTap, MAX_JSON_BYTES } from '../../src/gateway/usage-tap.js';

const SAMPLE = '/work/shared/engine-samples/stream-json-tooluse.jsonl';

/** Feeds `bytes` in chunks of `size` (cut anywhere, inside UTF-8 sequences too) and answers the result. */
function tapped(contentType: string, bytes: Buffer, size: number) {
  const tap = new UsageTap(contentType);
  for (let offset = 0; offset < bytes.length; offset += size) tap.feed(bytes.subarray(offset, offset + size));
  return tap.result();
}

/** Server-sent events as the API writes them. */
function sse(events: readonly Record<string, unknown>[], lineEnd = '\n'): Buffer {
  return Buffer.from(events.map((event) => `event: ${String(event['type'])}${lineEnd}data: ${JSON.stringify(event)}${lineEnd}${lineEnd}`).join(''));
}

describe('streamed answers', () => {
  it('the engine sample: model and input from message_start, output from the last message_delta', { skip: !existsSync(SAMPLE) && 'no engine samples here' }, () => {
    const events = readFileSync(SAMPLE, 'utf8').split('\n').filter((line) => line.includes('"stream_event"'))
      .map((line) => (JSON.parse(line) as { event: Record<string, unknown> }).event);
    // The first API answer of the session: its events up to its message_stop.
    const first = events.slice(0, events.findIndex((event) => event['type'] === 'message_stop') + 1);
    const start = first.find((event) => event['type'] === 'message_start') as { message: { model: string; usage: Record<string, number> } };
    const delta = first.filter((event) => event['type'] === 'message_delta').at(-1) as { usage: Record<string, number> };
    const expected = {
      model: start.message.model,
      tokens: { input_tokens: start.message.usage['input_tokens'], output_tokens: delta.usage['output_tokens'], cache_creation_input_tokens: start.message.usage['cache_creation_input_tokens'], cache_read_input_tokens: start.message.usage['cache_read_input_tokens'] },
      seen: true,
    };
    assert.notEqual(delta.usage['output_tokens'], start.message.usage['output_tokens'], 'the sample shows the running output count');
    for (const size of [1, 3, 64, 100_000]) assert.deepEqual(tapped('text/event-stream; charset=utf-8', sse(first), size), expected, `chunks of ${size}`);
    assert.deepEqual(tapped('text/event-stream', sse(first, '\r\n'), 7), expected, 'CRLF line ends');
  });

  it('a message_delta with input and cache counts (newer API versions) replaces those of message_start', () => {
    const events = [
      { type: 'message_start', message: { model: 'claude-sonnet-4-5', usage: { input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'é"type":"message_delta" 日本 {"usage":{"output_tokens":999}}' } },
      { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 12, output_tokens: 40, cache_creation_input_tokens: 5, cache_read_input_tokens: 300 } },
      { type: 'message_stop' },
    ];
    for (const size of [1, 2, 5, 4096]) {
      assert.deepEqual(tapped('text/event-stream', sse(events), size), {
        model: 'claude-sonnet-4-5', tokens: { input_tokens: 12, output_tokens: 40, cache_creation_input_tokens: 5, cache_read_input_tokens: 300 }, seen: true,
      }, `chunks of ${size}`);
    }
  });

  it('a stream cut short counts what it carried so far', () => {
    const events = [{ type: 'message_start', message: { model: 'm', usage: { input_tokens: 7, output_tokens: 1 } } }, { type: 'content_block_start', index: 0 }];
    const bytes = sse(events);
    assert.deepEqual(tapped('text/event-stream', bytes.subarray(0, bytes.length - 10), 16).tokens, { input_tokens: 7, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });

  it('an error event or garbage carries no usage', () => {
    const result = tapped('text/event-stream', Buffer.from('event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\ndata: {"type":"message_start", broken\n\n'), 5);
    assert.deepEqual(result, { model: undefined, tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, seen: false });
  });
});

describe('answers that do not stream', () => {
  it('model and usage are read from the JSON body at its end', () => {
    const body = Buffer.from(JSON.stringify({ id: 'msg_1', type: 'message', model: 'claude-haiku-4-5', content: [{ type: 'text', text: 'hé' }], usage: { input_tokens: 3, output_tokens: 4, cache_creation_input_tokens: 1, cache_read_input_tokens: 2 } }));
    for (const size of [1, 9, body.length]) {
      assert.deepEqual(tapped('application/json', body, size), { model: 'claude-haiku-4-5', tokens: { input_tokens: 3, output_tokens: 4, cache_creation_input_tokens: 1, cache_read_input_tokens: 2 }, seen: true });
    }
  });

  it('an answer above the copy limit, or of another type, is not counted', () => {
    const huge = Buffer.concat([Buffer.from('{"model":"m","usage":{"input_tokens":5},"pad":"'), Buffer.alloc(MAX_JSON_BYTES, 'x'), Buffer.from('"}')]);
    assert.equal(tapped('application/json', huge, 1 << 20).seen, false);
    assert.equal(tapped('text/plain', Buffer.from('{"usage":{"input_tokens":5}}'), 3).seen, false);
  });

  it('negative, fractional or non-numeric counts are ignored', () => {
    const body = Buffer.from(JSON.stringify({ model: 'm', usage: { input_tokens: -1, output_tokens: 2.5, cache_read_input_tokens: '9', cache_creation_input_tokens: 4 } }));
    assert.deepEqual(tapped('application/json', body, 4).tokens, { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 4, cache_read_input_tokens: 0 });
  });
});

describe("the offline model's answers", () => {
  it('streamed and not, the tap reads the usage the answer states', async () => {
    const model = await startOfflineModel();
    try {
      for (const stream of [true, false]) {
        const response = await fetch(`${model.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64_000, stream, messages: [{ role: 'user', content: 'slow: 10\nsay: counted tokens' }] }),
        });
        const bytes = Buffer.from(await response.arrayBuffer());
        const result = tapped(response.headers.get('content-type') ?? '', bytes, 13);
        const stated = stream
          ? (JSON.parse(/^data: (\{"type":"message_delta".*)$/m.exec(bytes.toString())![1]!) as { usage: unknown }).usage
          : (JSON.parse(bytes.toString()) as { usage: unknown }).usage;
        assert.equal(result.model, 'claude-sonnet-4-5');
        assert.deepEqual(result.tokens, stated, stream ? 'stream' : 'json');
        assert.ok(result.tokens.input_tokens > 0 && result.tokens.output_tokens > 0);
      }
    } finally {
      await model.close();
    }
  });
});
