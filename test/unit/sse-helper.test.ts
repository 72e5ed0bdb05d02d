// streamEvents over a real Fastify listener: frame bytes, heartbeats, the error frame, the end of the
// response in every case, and the abort signal when the client leaves.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { errors } from '../../src/errors.js';
import { acceptsEventStream, checkEventName, formatFrame, streamEvents, type SseChannel } from '../../src/http/sse.js';

let app: FastifyInstance;
let base: string;
let subscribers = 0;
const counter = { inc: () => (subscribers += 1), dec: () => (subscribers -= 1) };
let lastChannel: SseChannel | undefined;
let producerEnded: Promise<void> = Promise.resolve();

before(async () => {
  app = Fastify();
  const route = (path: string, heartbeatMs: number, produce: (channel: SseChannel) => Promise<void>) =>
    app.get(path, async (_request, reply) => {
      await streamEvents(reply, { heartbeatMs, subscribers: counter, maxBufferedBytes: 1024 * 1024 }, async (channel) => {
        lastChannel = channel;
        await produce(channel);
      });
    });
  route('/frames', 60_000, async (events) => {
    events.send({ type: 'output', content: 'line one\nline two' });
    events.send({ n: 2 }, 'custom');
  });
  route('/heartbeat', 50, async () => {
    await delay(230);
  });
  route('/berth-error', 60_000, async (events) => {
    events.send({ type: 'output', content: 'before' });
    throw errors.runFailed('engine failed: overloaded');
  });
  route('/other-error', 60_000, async () => {
    throw new Error('secret internal detail');
  });
  route('/endless', 60_000, async (events) => {
    let resolveEnd!: () => void;
    producerEnded = new Promise((resolve) => (resolveEnd = resolve));
    await new Promise<void>((resolve) => events.signal.addEventListener('abort', () => resolve(), { once: true }));
    resolveEnd();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
after(async () => {
  app.server.closeAllConnections();
  await app.close();
});

describe('SSE helper', () => {
  it('writes data frames as single JSON lines with text/event-stream headers', async () => {
    const response = await fetch(`${base}/frames`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(response.headers.get('cache-control'), 'no-cache, no-transform');
    assert.equal(
      await response.text(),
      'data: {"type":"output","content":"line one\\nline two"}\n\nevent: custom\ndata: {"n":2}\n\n',
    );
  });

  it('sends ": ping" heartbeat comments while the producer is quiet', async () => {
    const text = await (await fetch(`${base}/heartbeat`)).text();
    const pings = text.split('\n\n').filter((frame) => frame === ': ping').length;
    assert.ok(pings >= 3, `expected at least 3 pings in ${JSON.stringify(text)}`);
  });

  it('ends with an error frame carrying a BerthError message', async () => {
    const text = await (await fetch(`${base}/berth-error`)).text();
    assert.equal(
      text,
      'data: {"type":"output","content":"before"}\n\ndata: {"type":"error","error":"engine failed: overloaded"}\n\n',
    );
  });

  it('hides the message of an unexpected error', async () => {
    const text = await (await fetch(`${base}/other-error`)).text();
    assert.equal(text, 'data: {"type":"error","error":"internal error; see the service log for details"}\n\n');
  });

  it('aborts the producer signal when the client disconnects, and counts subscribers', async () => {
    const controller = new AbortController();
    const response = await fetch(`${base}/endless`, { signal: controller.signal });
    assert.equal(response.status, 200);
    await delay(50);
    assert.equal(subscribers, 1);
    assert.equal(lastChannel?.signal.aborted, false);
    controller.abort();
    await producerEnded;
    assert.equal(lastChannel?.signal.aborted, true);
    await delay(20);
    assert.equal(subscribers, 0);
  });

  it('gives a custom error frame the status the error would have had as a JSON answer', async () => {
    const fastify = (await import('fastify')).default;
    const app = fastify();
    const errorFrame = (error: string, status: number) => ({ type: 'error', error, status });
    app.get('/not-found', async (_request, reply) => {
      await streamEvents(reply, { heartbeatMs: 60_000, maxBufferedBytes: 1024, errorFrame }, async () => {
        throw errors.notFound('image "x"');
      });
    });
    app.get('/unexpected', async (_request, reply) => {
      await streamEvents(reply, { heartbeatMs: 60_000, maxBufferedBytes: 1024, errorFrame }, async () => {
        throw new Error('secret internal detail');
      });
    });
    try {
      assert.equal((await app.inject({ url: '/not-found' })).body, 'data: {"type":"error","error":"image \\"x\\" not found","status":404}\n\n');
      assert.equal((await app.inject({ url: '/unexpected' })).body, 'data: {"type":"error","error":"internal error; see the service log for details","status":500}\n\n');
    } finally {
      await app.close();
    }
  });

  it('streams only for an Accept header that names text/event-stream without q=0', () => {
    assert.equal(acceptsEventStream('text/event-stream'), true);
    assert.equal(acceptsEventStream('application/json, Text/Event-Stream;q=0.5'), true);
    assert.equal(acceptsEventStream('text/event-stream;q=0'), false);
    assert.equal(acceptsEventStream('application/json'), false);
    assert.equal(acceptsEventStream('*/*'), false);
    assert.equal(acceptsEventStream(undefined), false);
  });

  it('refuses event names with CR or LF', () => {
    assert.throws(() => checkEventName('output\ndata: forged'), TypeError);
    assert.throws(() => formatFrame({}, 'a\rb'), TypeError);
    assert.equal(formatFrame({ a: 1 }, 'ok'), 'event: ok\ndata: {"a":1}\n\n');
  });
});

describe('a client that does not read', () => {
  it('is cut off once it leaves more than maxBufferedBytes unread, and its producer is aborted', async () => {
    const { connect } = await import('node:net');
    const fastify = (await import('fastify')).default;
    const app = fastify();
    let aborted = false;
    app.get('/flood', async (_request, reply) => {
      await streamEvents(reply, { heartbeatMs: 60_000, maxBufferedBytes: 64 * 1024 }, async (channel) => {
        const chunk = 'x'.repeat(64 * 1024);
        for (let i = 0; i < 2000 && !channel.signal.aborted; i++) {
          channel.send({ type: 'output', content: chunk });
          await new Promise((resolve) => setImmediate(resolve));
        }
        aborted = channel.signal.aborted;
      });
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      const socket = connect({ host: '127.0.0.1', port });
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(`GET /flood HTTP/1.1\r\nHost: x\r\n\r\n`);
      socket.pause();
      socket.on('error', () => undefined);
      for (let waited = 0; !aborted && waited < 20_000; waited += 50) await delay(50);
      assert.equal(aborted, true, 'the producer was stopped instead of buffering ~128 MiB for the client');
      socket.destroy();
    } finally {
      await app.close();
    }
  });

  it('is not cut off for one frame larger than the limit followed at once by another', async () => {
    const fastify = (await import('fastify')).default;
    const app = fastify();
    const big = 'y'.repeat(512 * 1024);
    app.get('/large', async (_request, reply) => {
      await streamEvents(reply, { heartbeatMs: 60_000, maxBufferedBytes: 64 * 1024 }, async (channel) => {
        channel.send({ type: 'output', content: big });
        channel.send({ type: 'result', content: big });
        await delay(200);
        channel.send({ type: 'done' });
      });
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const port = (app.server.address() as { port: number }).port;
      const text = await (await fetch(`http://127.0.0.1:${port}/large`)).text();
      assert.equal(text.split('\n\n').filter((frame) => frame.startsWith('data:')).length, 3, 'all three frames arrived');
      assert.match(text, /"done"/);
    } finally {
      await app.close();
    }
  });
});
