import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import Fastify from 'fastify';
import { abortOnDisconnect } from '../../src/http/disconnect.js';
import { loopbackFetch, type LoopbackCaller } from '../../src/http/loopback-fetch.js';

const CALLER: LoopbackCaller = { authorization: 'Bearer caller-token', forwardedFor: '203.0.113.7', remoteAddress: '198.51.100.2' };

async function testApp() {
  const app = Fastify();
  const seen: { left: boolean } = { left: false };
  app.get('/whoami', async (request) => ({
    authorization: request.headers.authorization ?? null,
    forwardedFor: request.headers['x-forwarded-for'] ?? null,
    address: request.socket.remoteAddress,
    accept: request.headers.accept ?? null,
  }));
  app.put('/echo', async (request) => ({ length: (request.body as Buffer).length }));
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  // Answers only when the client leaves, as a sync run does.
  app.post('/until-gone', async (_request, reply) => {
    const signal = abortOnDisconnect(reply.raw);
    await once(signal, 'abort');
    seen.left = true;
    return {};
  });
  app.get('/stream', (_request, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
    reply.raw.write('data: one\n\n');
    reply.raw.on('close', () => {
      seen.left = true;
    });
  });
  await app.ready();
  return { app, seen };
}

test("requests carry the caller's Authorization and address, never the client's own", async () => {
  const { app } = await testApp();
  const send = loopbackFetch(app, CALLER);
  const answer = await send('http://berth.invalid/whoami', { headers: { authorization: 'Bearer sdk-own', 'x-forwarded-for': '10.0.0.1', accept: 'application/json' } });
  assert.equal(answer.status, 200);
  assert.deepEqual(await answer.json(), { authorization: 'Bearer caller-token', forwardedFor: '203.0.113.7', address: '198.51.100.2', accept: 'application/json' });
  await app.close();
});

test('a caller without an Authorization header sends none', async () => {
  const { app } = await testApp();
  const answer = await loopbackFetch(app, { authorization: undefined, forwardedFor: undefined, remoteAddress: '127.0.0.1' })('http://x/whoami', { headers: { authorization: 'Bearer sdk-own' } });
  assert.equal((await answer.json()).authorization, null);
  await app.close();
});

test('a request body is delivered whole', async () => {
  const { app } = await testApp();
  const answer = await loopbackFetch(app, CALLER)('http://x/echo', { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(100_000) });
  assert.deepEqual(await answer.json(), { length: 100_000 });
  await app.close();
});

test('aborting a request before its answer is a client that left: the route sees its response close', async () => {
  const { app, seen } = await testApp();
  const abort = new AbortController();
  const pending = loopbackFetch(app, CALLER)('http://x/until-gone', { method: 'POST', signal: abort.signal });
  await new Promise((resolve) => setTimeout(resolve, 50));
  abort.abort();
  await assert.rejects(pending, { name: 'AbortError' });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(seen.left, true);
  await app.close();
});

test('an event stream is read as it is written, and cancelling its body closes it for the route', async () => {
  const { app, seen } = await testApp();
  const answer = await loopbackFetch(app, CALLER)('http://x/stream');
  const reader = answer.body!.getReader();
  assert.equal(new TextDecoder().decode((await reader.read()).value), 'data: one\n\n');
  await reader.cancel();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(seen.left, true);
  await app.close();
});
