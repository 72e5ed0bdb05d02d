// The model gateway (src/gateway/model-forward.ts through startGateway) against a fake upstream model on a
// real local socket: the per-run credential is replaced by the real one (API key or OAuth token), unknown or
// unbound credentials and spent budgets are refused before the upstream sees anything, answers stream
// through without being held back, and each request's usage is recorded once its answer ended.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { BlockList, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { estimateCostUsd } from '../../src/engine/pricing.js';
import { BUDGETS_UNAVAILABLE, INVALID_CREDENTIAL } from '../../src/gateway/model-forward.js';
import { startTestGateway, type TestGateway } from '../support/gateway-doubles.js';

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A fake model API: records each request, answers with the current handler, counts its connections. */
class FakeUpstream {
  readonly seen: Seen[] = [];
  connections = 0;
  handler: (request: Seen, response: ServerResponse) => void = (_request, response) => json(response, 200, message('claude-sonnet-4-5', 10, 5));
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor() {
    this.server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const seen = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString() };
      this.seen.push(seen);
      this.handler(seen, response);
    });
    this.server.on('connection', (socket: Socket) => {
      this.connections++;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<string> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function message(model: string, input: number, output: number): Record<string, unknown> {
  return { id: 'msg_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: 'hi' }], usage: { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 2, cache_read_input_tokens: 3 } };
}

function json(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

const BODY = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] });

/** POSTs through the gateway with the given headers; answers status, headers and body. */
async function post(gateway: TestGateway, path: string, headers: Record<string, string>, body = BODY): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** The same through node:http, which sends any header field as given (fetch refuses Connection lists). */
function postRaw(gateway: TestGateway, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, async (response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of response) chunks.push(chunk as Buffer);
      resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
    });
    request.on('error', reject);
    request.end(BODY);
  });
}

/** Waits until the gateway recorded `count` requests (records are written once the answer ended). */
async function recorded(gateway: TestGateway, count: number): Promise<void> {
  for (let waited = 0; gateway.usage.requests.length < count; waited += 5) {
    if (waited > 2000) assert.fail(`${gateway.usage.requests.length} of ${count} requests recorded`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('with an API key upstream', () => {
  const upstream = new FakeUpstream();
  let gateway: TestGateway;
  before(async () => {
    const base = await upstream.start();
    gateway = await startTestGateway({ upstream: { baseUrl: `${base}/prefix/`, credential: { kind: 'api_key', value: 'sk-ant-real-key' } } });
    gateway.grants.bind('brt_run1', { runId: 'run-1', caller: 'alice', sessionId: 'sess-1' });
    gateway.grants.issue('brt_pooled', 'run-pooled');
  });
  after(async () => {
    await gateway.handle.close();
    await upstream.close();
  });
  afterEach(() => {
    upstream.seen.length = 0;
    gateway.usage.requests.length = 0;
    gateway.budgets.decision = { ok: true };
    gateway.budgets.failure = undefined;
  });

  it("forwards with the real key in place of the run's, the body as sent, the path under the upstream's, without hop-by-hop fields", async () => {
    const answer = await postRaw(gateway, '/v1/messages?beta=true', {
      'x-api-key': 'brt_run1', authorization: 'Bearer brt_run1', 'anthropic-version': '2023-06-01', 'accept-encoding': 'gzip, br',
      'x-drop-me': '1', connection: 'keep-alive, x-drop-me', 'proxy-authorization': 'Basic eDp5',
    });
    assert.equal(answer.status, 200);
    assert.equal(JSON.parse(answer.body).model, 'claude-sonnet-4-5');
    const [seen] = upstream.seen;
    assert.equal(seen!.url, '/prefix/v1/messages?beta=true');
    assert.equal(seen!.body, BODY);
    assert.equal(seen!.headers['x-api-key'], 'sk-ant-real-key');
    assert.equal(seen!.headers.authorization, undefined, 'the run token is not passed on in any header');
    assert.equal(seen!.headers['anthropic-version'], '2023-06-01');
    assert.equal(seen!.headers['accept-encoding'], 'identity', 'the answer must be readable by the usage tap');
    assert.equal(seen!.headers['x-drop-me'], undefined, 'a field the Connection header names is hop-by-hop');
    assert.equal(seen!.headers['proxy-authorization'], undefined);
    assert.equal(seen!.headers.host, new URL(`http://${seen!.headers.host}`).host, 'Host names the upstream');
    assert.ok(!JSON.stringify(seen!.headers).includes('brt_run1'));
  });

  it('accepts the run token as a bearer token too', async () => {
    assert.equal((await post(gateway, '/v1/messages', { authorization: 'Bearer brt_run1' })).status, 200);
    assert.equal(upstream.seen[0]!.headers['x-api-key'], 'sk-ant-real-key');
  });

  it('refuses 401 without a credential, with an unknown one, and with one issued to a pooled engine not yet claimed; the upstream sees nothing', async () => {
    const before = await gateway.count('gatewayRequests', 'refused_credential');
    const attempts: Record<string, string>[] = [{}, { 'x-api-key': 'brt_unknown' }, { authorization: 'Bearer brt_unknown' }, { 'x-api-key': 'brt_pooled' }, { 'x-api-key': 'sk-ant-real-key' }];
    for (const headers of attempts) {
      const answer = await post(gateway, '/v1/messages', headers);
      assert.equal(answer.status, 401, JSON.stringify(headers));
      assert.deepEqual(JSON.parse(answer.body), { type: 'error', error: { type: 'authentication_error', message: INVALID_CREDENTIAL } });
    }
    assert.equal(upstream.seen.length, 0);
    assert.equal(gateway.usage.requests.length, 0);
    assert.equal((await gateway.count('gatewayRequests', 'refused_credential')) - before, 5);
  });

  it('a spent budget: 403 in the Messages API shape, onBudgetRefusal, a record naming the limit; the upstream sees nothing', async () => {
    const message = "this run's max_budget_usd (0.01 USD) is spent: 0.0123 USD used";
    gateway.budgets.refuse('run', message);
    gateway.refusals.length = 0;
    const answer = await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run1' });
    assert.equal(answer.status, 403);
    assert.deepEqual(JSON.parse(answer.body), { type: 'error', error: { type: 'permission_error', message: `Berth: model budget reached: ${message}` } });
    assert.deepEqual(gateway.refusals, [{ runId: 'run-1', message }]);
    assert.equal(upstream.seen.length, 0);
    await recorded(gateway, 1);
    const [record] = gateway.usage.requests;
    assert.deepEqual({ ...record, at: 0 }, {
      at: 0, caller: 'alice', runId: 'run-1', sessionId: 'sess-1', model: 'claude-sonnet-4-5', status: 403, costUsd: 0,
      tokens: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }, refusal: { limit: 'run', message },
    });
    assert.equal(await gateway.count('gatewayRequests', 'refused_budget'), 1);
    assert.equal(gateway.budgets.checked.at(-1)!.runId, 'run-1');
  });

  it('budgets that cannot be read (the usage store is down): 503 in the Messages API shape; the upstream sees nothing', async () => {
    gateway.budgets.failure = new Error('connection terminated');
    const answer = await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run1' });
    assert.equal(answer.status, 503);
    assert.deepEqual(JSON.parse(answer.body), { type: 'error', error: { type: 'api_error', message: BUDGETS_UNAVAILABLE } });
    assert.equal(upstream.seen.length, 0);
    assert.equal(gateway.usage.requests.length, 0);
    assert.ok(gateway.logs.some((entry) => entry.message.includes('could not be read from the usage store')));
    assert.equal(await gateway.count('gatewayRequests', 'budget_unavailable'), 1);
  });

  it('records a non-streaming answer: model, tokens, cost from the price table, status, overhead', async () => {
    await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run1' });
    await recorded(gateway, 1);
    const [record] = gateway.usage.requests;
    const tokens = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 2, cache_read_input_tokens: 3 };
    assert.equal(record!.model, 'claude-sonnet-4-5');
    assert.deepEqual(record!.tokens, tokens);
    assert.equal(record!.costUsd, estimateCostUsd(tokens, 'claude-sonnet-4-5'));
    assert.ok(record!.costUsd > 0);
    assert.equal(record!.status, 200);
    assert.equal(record!.runId, 'run-1');
    assert.ok(typeof record!.overheadMs === 'number' && record!.overheadMs >= 0);
    const tokenSeries = (await gateway.metrics.modelTokens.get()).values;
    assert.ok(tokenSeries.some((value) => value.labels['kind'] === 'output' && value.value >= 5));
  });

  it("forwards the upstream's errors as they are, and records them", async () => {
    upstream.handler = (_request, response) => json(response, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    try {
      const answer = await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run1' });
      assert.equal(answer.status, 529);
      assert.equal(JSON.parse(answer.body).error.type, 'overloaded_error');
      await recorded(gateway, 1);
      assert.equal(gateway.usage.requests[0]!.status, 529);
    } finally {
      upstream.handler = (_request, response) => json(response, 200, message('claude-sonnet-4-5', 10, 5));
    }
  });

  it('forwards other /v1 endpoints (count_tokens) without a usage record', async () => {
    upstream.handler = (_request, response) => json(response, 200, { input_tokens: 42 });
    try {
      const answer = await post(gateway, '/v1/messages/count_tokens', { 'x-api-key': 'brt_run1' });
      assert.deepEqual(JSON.parse(answer.body), { input_tokens: 42 });
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(gateway.usage.requests.length, 0);
    } finally {
      upstream.handler = (_request, response) => json(response, 200, message('claude-sonnet-4-5', 10, 5));
    }
  });

  it('keeps the upstream connection alive across requests', async () => {
    const before = upstream.connections;
    for (let index = 0; index < 5; index++) await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run1' });
    assert.ok(upstream.connections - before <= 1, `${upstream.connections - before} new upstream connections for 5 requests`);
  });

  it('answers 404 in the Messages API shape outside /v1 and proxy requests', async () => {
    const response = await fetch(`${gateway.url}/health`);
    assert.equal(response.status, 404);
    assert.equal(((await response.json()) as { error: { type: string } }).error.type, 'not_found_error');
  });
});

describe('with an OAuth token upstream', () => {
  const upstream = new FakeUpstream();
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ upstream: { baseUrl: await upstream.start(), credential: { kind: 'oauth_token', value: 'sk-ant-oat-real' } } });
    gateway.grants.bind('brt_run2', { runId: 'run-2' });
  });
  after(async () => {
    await gateway.handle.close();
    await upstream.close();
  });

  it('sends the token as a bearer token, no x-api-key, and adds the OAuth beta to those the engine asked for', async () => {
    await post(gateway, '/v1/messages', { 'x-api-key': 'brt_run2', 'anthropic-beta': 'claude-code-20250219, fine-grained-tool-streaming-2025-05-14' });
    const { headers } = upstream.seen[0]!;
    assert.equal(headers.authorization, 'Bearer sk-ant-oat-real');
    assert.equal(headers['x-api-key'], undefined);
    assert.equal(headers['anthropic-beta'], 'claude-code-20250219,fine-grained-tool-streaming-2025-05-14,oauth-2025-04-20');
    await post(gateway, '/v1/messages', { authorization: 'Bearer brt_run2', 'anthropic-beta': 'oauth-2025-04-20' });
    assert.equal(upstream.seen[1]!.headers['anthropic-beta'], 'oauth-2025-04-20', 'not added twice');
  });
});

describe('streaming', () => {
  const upstream = new FakeUpstream();
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ upstream: { baseUrl: await upstream.start(), credential: { kind: 'api_key', value: 'sk-real' } } });
    gateway.grants.bind('brt_stream', { runId: 'run-s', caller: 'bob' });
  });
  after(async () => {
    await gateway.handle.close();
    await upstream.close();
  });

  /** Starts a streaming request through the gateway; answers the response once its headers arrived. */
  function streamRequest(): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(`${gateway.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'brt_stream', 'content-type': 'application/json' } }, resolve);
      request.on('error', reject);
      request.end(JSON.stringify({ model: 'claude-opus-4-5', stream: true, messages: [] }));
    });
  }

  it('passes each event through as it comes: the first reaches the engine while the upstream is still answering', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let upstreamEnded = false;
    upstream.handler = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(event('message_start', { message: { model: 'claude-opus-4-5', usage: { input_tokens: 100, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 50 } } }));
      // The rest waits until the client has seen the first event: a buffering gateway never gets there.
      void released.then(() => {
        response.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'hello' } }));
        response.write(event('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 30 } }));
        response.end(event('message_stop', {}));
        upstreamEnded = true;
      });
    };
    const response = await streamRequest();
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'text/event-stream');
    let text = '';
    const firstEvent = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the first event did not arrive before the upstream finished: the gateway buffers')), 3000);
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes('message_start')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    await firstEvent;
    assert.equal(upstreamEnded, false);
    release();
    await once(response, 'end');
    assert.match(text, /message_stop/);
    await recorded(gateway, 1);
    const [record] = gateway.usage.requests;
    assert.equal(record!.caller, 'bob');
    assert.equal(record!.model, 'claude-opus-4-5');
    assert.deepEqual(record!.tokens, { input_tokens: 100, output_tokens: 30, cache_creation_input_tokens: 0, cache_read_input_tokens: 50 });
    assert.equal(record!.costUsd, estimateCostUsd(record!.tokens, 'claude-opus-4-5'));
    const overhead = await gateway.metrics.gatewayOverhead.get();
    assert.equal(overhead.values.find((value) => value.metricName === 'berth_gateway_overhead_seconds_count')?.value, 1);
  });

  it('an engine hanging up mid-answer stops the upstream request, and what was seen is recorded', async () => {
    gateway.usage.requests.length = 0;
    const upstreamClosed = new Promise<void>((resolve) => {
      upstream.handler = (_request, response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(event('message_start', { message: { model: 'claude-haiku-4-5', usage: { input_tokens: 7, output_tokens: 1 } } }));
        response.on('close', () => resolve());
      };
    });
    const response = await streamRequest();
    await once(response, 'data');
    response.destroy();
    await upstreamClosed;
    await recorded(gateway, 1);
    assert.deepEqual(gateway.usage.requests[0]!.tokens, { input_tokens: 7, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });
});

describe('upstream failures', () => {
  it('an unreachable upstream: 502 api_error, counted and recorded', async () => {
    // A port that was just free: nothing listens there.
    const probe = createNetServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const gateway = await startTestGateway({ upstream: { baseUrl: `http://127.0.0.1:${port}`, credential: { kind: 'api_key', value: 'k' } } });
    try {
      gateway.grants.bind('brt_x', { runId: 'run-x' });
      const answer = await post(gateway, '/v1/messages', { 'x-api-key': 'brt_x' });
      assert.equal(answer.status, 502);
      assert.equal(JSON.parse(answer.body).error.type, 'api_error');
      assert.match(JSON.parse(answer.body).error.message, /ECONNREFUSED/);
      assert.equal(await gateway.count('gatewayRequests', 'upstream_error'), 1);
      await recorded(gateway, 1);
      assert.equal(gateway.usage.requests[0]!.status, 502);
    } finally {
      await gateway.handle.close();
    }
  });

  it('a kept-alive connection the upstream drops as it is reused is retried once on a new one', async () => {
    // Answers the first request of each connection and drops the connection at its second request, as an
    // upstream does when its idle timeout and the reuse cross.
    const answered = new WeakSet<Socket>();
    let connections = 0;
    const server = createNetServer((socket) => {
      connections++;
      socket.on('error', () => undefined);
      let buffer = '';
      socket.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const end = buffer.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(buffer)?.[1] ?? 0);
        if (end === -1 || buffer.length < end + 4 + length) return;
        buffer = '';
        if (answered.has(socket)) return void socket.destroy();
        answered.add(socket);
        const body = JSON.stringify(message('claude-sonnet-4-5', 1, 1));
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`);
      });
    }).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const gateway = await startTestGateway({ upstream: { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, credential: { kind: 'api_key', value: 'k' } } });
    try {
      gateway.grants.bind('brt_r', { runId: 'run-r' });
      assert.equal((await post(gateway, '/v1/messages', { 'x-api-key': 'brt_r' })).status, 200);
      assert.equal((await post(gateway, '/v1/messages', { 'x-api-key': 'brt_r' })).status, 200, 'the second request, on the reused connection, still answered');
      assert.equal(connections, 2);
    } finally {
      await gateway.handle.close();
      server.close();
    }
  });
});

describe('allowed clients', () => {
  it('closes connections from addresses outside allowedClients before reading a byte', async () => {
    const allowed = new BlockList();
    allowed.addSubnet('10.89.0.0', 24);
    const gateway = await startTestGateway({ allowedClients: allowed });
    try {
      gateway.grants.bind('brt_a', { runId: 'run-a' });
      await assert.rejects(fetch(`${gateway.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'brt_a' }, body: BODY }));
      assert.equal(await gateway.count('gatewayRequests', 'refused_credential'), 0);
    } finally {
      await gateway.handle.close();
    }
  });
});
