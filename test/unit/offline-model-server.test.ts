import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { messagesIn, readSse } from '../support/sse.js';

const KEY = 'test-key';
let model: OfflineModel;

before(async () => {
  model = await startOfflineModel({ port: 0, apiKey: KEY });
});

after(async () => {
  await model.close();
});

interface Frame {
  event: string;
  data: Record<string, any>;
  at: number;
}

function body(prompt: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: 'claude-opus-5-5',
    max_tokens: 128000,
    stream: true,
    tools: [{ name: 'Bash', input_schema: {} }],
    messages: [{ role: 'user', content: [{ type: 'text', text: prompt }] }],
    ...extra,
  };
}

function post(path: string, payload: unknown, headers: Record<string, string> = { 'x-api-key': KEY }): Promise<Response> {
  return fetch(`${model.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(payload) });
}

/** Reads the SSE body as it arrives, noting when each frame came in. */
async function frames(response: Response): Promise<Frame[]> {
  const result: Frame[] = [];
  for await (const pieces of readSse(response)) {
    for (const { event, data } of messagesIn(pieces)) result.push({ event: event ?? '', data: JSON.parse(data), at: performance.now() });
  }
  return result;
}

test('the url names the ephemeral port actually bound', () => {
  assert.ok(model.port > 0);
  assert.equal(model.url, `http://127.0.0.1:${model.port}`);
});

test('GET /health answers 200', async () => {
  const response = await fetch(`${model.url}/health`);
  assert.equal(response.status, 200);
  await response.text();
});

test('a streamed text answer is framed as the Messages API does', async () => {
  const response = await post('/v1/messages?beta=true', body('say: hi there'));
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  const received = await frames(response);
  assert.deepEqual(
    received.map((frame) => frame.event),
    ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
  );
  for (const frame of received) assert.equal(frame.data.type, frame.event);
  const start = received[0]!.data.message;
  assert.equal(start.model, 'claude-opus-5-5');
  assert.equal(start.usage.output_tokens, 2);
  assert.ok(start.usage.input_tokens > 0);
  assert.deepEqual(received[2]!.data.delta, { type: 'text_delta', text: 'hi there' });
  assert.equal(received[4]!.data.delta.stop_reason, 'end_turn');
  assert.deepEqual(received[4]!.data.usage, start.usage);
});

test('a streamed tool call carries its input as input_json_delta', async () => {
  const received = await frames(await post('/v1/messages', body('run: echo hi')));
  const blockStart = received.find((frame) => frame.event === 'content_block_start')!.data.content_block;
  assert.equal(blockStart.type, 'tool_use');
  assert.equal(blockStart.name, 'Bash');
  assert.deepEqual(blockStart.input, {});
  const partial = received.filter((frame) => frame.event === 'content_block_delta').map((frame) => frame.data.delta.partial_json).join('');
  assert.deepEqual(JSON.parse(partial), { command: 'echo hi', description: 'offline model run' });
  assert.equal(received.find((frame) => frame.event === 'message_delta')!.data.delta.stop_reason, 'tool_use');
});

test('a request with stream false gets one JSON message', async () => {
  const response = await post('/v1/messages', body('say: plain', { stream: false }));
  assert.equal(response.status, 200);
  const message = await response.json();
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.deepEqual(message.content, [{ type: 'text', text: 'plain' }]);
  assert.equal(message.stop_reason, 'end_turn');
  assert.equal(message.usage.output_tokens, 2);
});

test('count_tokens answers with the input token count', async () => {
  const payload = body('hello');
  const response = await post('/v1/messages/count_tokens?beta=true', payload);
  assert.deepEqual(await response.json(), { input_tokens: Math.ceil(JSON.stringify(payload.messages).length / 4) });
});

test('fail: answers with the Anthropic error status and body', async () => {
  const response = await post('/v1/messages', body('fail: overloaded'));
  assert.equal(response.status, 529);
  assert.deepEqual(await response.json(), {
    type: 'error',
    error: { type: 'overloaded_error', message: 'Overloaded (offline model fail: overloaded)' },
  });
});

test('a missing or wrong key is refused with authentication_error', async () => {
  const attempts: Record<string, string>[] = [{}, { 'x-api-key': 'wrong' }, { authorization: 'Bearer wrong' }];
  for (const headers of attempts) {
    const response = await post('/v1/messages', body('say: hi'), headers);
    assert.equal(response.status, 401);
    assert.equal((await response.json()).error.type, 'authentication_error');
  }
});

test('the key is accepted as a bearer token', async () => {
  const response = await post('/v1/messages', body('say: hi', { stream: false }), { authorization: `Bearer ${KEY}` });
  assert.equal(response.status, 200);
  await response.json();
});

test('unknown routes are 404 in the Anthropic error shape', async () => {
  for (const [method, path] of [['GET', '/v1/models'], ['GET', '/v1/messages'], ['HEAD', '/api/hello']] as const) {
    const response = await fetch(`${model.url}${path}`, { method, headers: { 'x-api-key': KEY } });
    assert.equal(response.status, 404, `${method} ${path}`);
    if (method !== 'HEAD') assert.equal((await response.json()).error.type, 'not_found_error');
    else await response.text();
  }
});

test('a body that is not JSON is a 400 invalid_request_error', async () => {
  const response = await fetch(`${model.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': KEY }, body: '{nope' });
  assert.equal(response.status, 400);
  assert.equal((await response.json()).error.type, 'invalid_request_error');
});

test('slow: streams the answer in at least three deltas spaced by the delay', async () => {
  const received = await frames(await post('/v1/messages', body('slow: 60\nsay: a slowly streamed answer')));
  const deltas = received.filter((frame) => frame.event === 'content_block_delta');
  assert.ok(deltas.length >= 3);
  assert.equal(deltas.map((frame) => frame.data.delta.text).join(''), 'a slowly streamed answer');
  for (let index = 1; index < deltas.length; index++) {
    assert.ok(deltas[index]!.at - deltas[index - 1]!.at >= 45, `gap before delta ${index}`);
  }
});

test('sleep: delays the reply', async () => {
  const started = performance.now();
  const response = await post('/v1/messages', body('sleep: 150\nsay: late', { stream: false }));
  await response.json();
  assert.ok(performance.now() - started >= 140);
});

test('close() returns promptly while a reply is still sleeping and a keep-alive connection is open', async () => {
  const other = await startOfflineModel({ port: 0 });
  const idle = await fetch(`${other.url}/health`);
  await idle.text();
  const pending = fetch(`${other.url}/v1/messages`, {
    method: 'POST',
    body: JSON.stringify(body('sleep: 30000\nsay: never')),
  }).then(
    () => 'answered',
    () => 'cut off',
  );
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = performance.now();
  await other.close();
  // Generous for a loaded machine, and still far below the 30 s the reply would sleep.
  assert.ok(performance.now() - started < 10_000);
  assert.equal(await pending, 'cut off');
});
