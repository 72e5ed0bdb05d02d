// @berth/client's transport with a scripted fetch: which failures are sent again, how long it waits, how
// it keeps to X-RateLimit-Remaining, how a 401 renews the token, and what errors look like.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BerthError, BerthNetworkError } from '../../packages/client/src/errors.js';
import { RateGate } from '../../packages/client/src/rate-gate.js';
import { retryPolicy } from '../../packages/client/src/retry-policy.js';
import { MemoryTokenStore, TokenManager, type IssuedPair, type TokenEndpoints, type Tokens } from '../../packages/client/src/tokens.js';
import { Transport } from '../../packages/client/src/transport.js';

const BASE = 'http://berth.test';
type Answer = Response | Error | ((request: Request) => Response | Error | Promise<Response | Error>);

/** A fetch that answers from a script, one entry per call, and records what it was sent. */
function scripted(...answers: Answer[]) {
  const sent: { method: string; path: string; authorization: string | null; at: number }[] = [];
  const fetch = async (input: RequestInfo | URL): Promise<Response> => {
    const request = input as Request;
    sent.push({ method: request.method, path: new URL(request.url).pathname, authorization: request.headers.get('authorization'), at: Date.now() });
    const next = answers.shift();
    if (next === undefined) throw new Error(`unexpected request ${request.method} ${request.url}`);
    const answer = typeof next === 'function' ? await next(request) : next;
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { fetch: fetch as typeof globalThis.fetch, sent };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
const refused = (status: number, error: string, headers: Record<string, string> = {}) => json(status, { error, status: 'error' }, headers);
const networkError = () => new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });

function transport(fetch: typeof globalThis.fetch, tokens?: TokenManager, retries = 3) {
  return new Transport({
    baseUrl: BASE,
    fetch,
    tokens: tokens ?? new TokenManager({ clientId: 'test', store: new MemoryTokenStore(), endpoints: noEndpoints }),
    retries,
    backoff: { initial: 5, max: 20 },
    gate: new RateGate({ emptyBucketPauseMs: 150 }),
  });
}

const noEndpoints: TokenEndpoints = {
  exchange: () => Promise.reject(new Error('no exchange expected')),
  refresh: () => Promise.reject(new Error('no refresh expected')),
};

const request = (method: string, path: string, body?: unknown) =>
  new Request(`${BASE}${path}`, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: body === undefined ? {} : { 'content-type': 'application/json' } });

test('reads are sent again after 503, 429 and network errors until they succeed', async () => {
  const { fetch, sent } = scripted(refused(503, 'container runtime unavailable: x'), networkError(), refused(429, 'rate limit exceeded; slow down and retry later'), json(200, { jobs: [] }));
  const response = await transport(fetch).fetch(request('GET', '/jobs'));
  assert.deepEqual(await response.json(), { jobs: [] });
  assert.equal(sent.length, 4);
});

test('after the configured retries the last refusal is the error', async () => {
  const { fetch, sent } = scripted(...Array.from({ length: 3 }, () => refused(503, 'server at capacity: 2 containers are running (SERVICE_MAX_CONTAINERS); retry later')));
  await assert.rejects(transport(fetch, undefined, 2).fetch(request('GET', '/agents')), (error: BerthError) => {
    assert.ok(error instanceof BerthError);
    assert.equal(error.status, 503);
    assert.match(error.error, /server at capacity/);
    return true;
  });
  assert.equal(sent.length, 3);
});

test('a sync run is sent again after 429 only: its 503 may come after it started', async () => {
  const limited = scripted(refused(429, 'rate limit exceeded; slow down and retry later'), json(200, { output: 'hi' }));
  await transport(limited.fetch).fetch(request('POST', '/run', { prompt: 'say: hi' }));
  assert.equal(limited.sent.length, 2);

  const stopped = scripted(refused(503, 'the service is shutting down and stopped this run'));
  await assert.rejects(transport(stopped.fetch).fetch(request('POST', '/run', { prompt: 'say: hi' })), { name: 'BerthError', status: 503 });
  assert.equal(stopped.sent.length, 1);
});

test('work-starting calls are not sent again after a network error: the server may have accepted them', async () => {
  for (const [method, path] of [['POST', '/run/async'], ['POST', '/agents/agent-1/send'], ['POST', '/run'], ['GET', '/run/stream']] as const) {
    const { fetch, sent } = scripted(networkError());
    await assert.rejects(transport(fetch).fetch(request(method, path, method === 'POST' ? { prompt: 'x' } : undefined)), (error: Error) => {
      assert.ok(error instanceof BerthNetworkError, `${method} ${path}: ${error}`);
      assert.match(error.message, /ECONNREFUSED/);
      return true;
    });
    assert.equal(sent.length, 1, `${method} ${path}`);
  }
});

test('the retry rules, route by route', () => {
  const rule = (method: string, path: string) => {
    const policy = retryPolicy(method, path);
    return [[...policy.statuses].sort().join(','), policy.networkErrors];
  };
  assert.deepEqual(rule('GET', '/jobs/job-1'), ['429,503', true]);
  assert.deepEqual(rule('DELETE', '/agents/agent-1'), ['429,503', true]);
  assert.deepEqual(rule('POST', '/auth/refresh'), ['429,503', true]);
  assert.deepEqual(rule('POST', '/images/pull'), ['429,503', true]);
  assert.deepEqual(rule('GET', '/run/stream'), ['429,503', false]);
  assert.deepEqual(rule('POST', '/run/async'), ['429,503', false]);
  assert.deepEqual(rule('POST', '/agents'), ['429,503', false]);
  assert.deepEqual(rule('POST', '/agents/agent-1/send'), ['429,503', false]);
  assert.deepEqual(rule('POST', '/run'), ['429', false]);
  assert.deepEqual(rule('PUT', '/jobs'), ['', false]);
});

test('a 429 waits as long as its Retry-After says', async () => {
  const { fetch, sent } = scripted(refused(429, 'rate limit exceeded; slow down and retry later', { 'retry-after': '1' }), json(200, {}));
  await transport(fetch).fetch(request('GET', '/health'));
  const waited = sent[1]!.at - sent[0]!.at;
  assert.ok(waited >= 950, `waited ${waited} ms`);
});

test('X-RateLimit-Remaining: 0 holds the next request back instead of sending it into a 429', async () => {
  const { fetch, sent } = scripted(json(200, {}, { 'x-ratelimit-remaining': '1' }), json(200, {}, { 'x-ratelimit-remaining': '0' }), json(200, {}, { 'x-ratelimit-remaining': '0' }));
  const client = transport(fetch);
  await client.fetch(request('GET', '/health'));
  await client.fetch(request('GET', '/health'));
  await client.fetch(request('GET', '/health'));
  const [atOnce, heldBack] = [sent[1]!.at - sent[0]!.at, sent[2]!.at - sent[1]!.at];
  assert.ok(heldBack >= 140, `held back ${heldBack} ms after an empty bucket`);
  // Relative, not absolute: a request with tokens left is not held like the one after the empty bucket.
  assert.ok(atOnce * 2 < heldBack, `a request with tokens left goes at once (${atOnce} ms, against ${heldBack} ms held back)`);
});

test('while the bucket is empty, concurrent requests go one at a time', async () => {
  const empty = () => json(200, {}, { 'x-ratelimit-remaining': '0' });
  const { fetch, sent } = scripted(empty(), empty(), empty(), empty());
  const client = transport(fetch);
  await client.fetch(request('GET', '/health'));
  await Promise.all([1, 2, 3].map(() => client.fetch(request('GET', '/health'))));
  const gaps = sent.slice(1).map((s, i) => s.at - sent[i]!.at);
  assert.ok(gaps.every((gap) => gap >= 140), `gaps ${gaps.join(', ')} ms`);
});

test('an abort during a back-off rejects with the AbortError itself', async () => {
  const { fetch } = scripted(refused(503, 'container runtime unavailable: x'));
  const controller = new AbortController();
  const slow = new Transport({ baseUrl: BASE, fetch, tokens: new TokenManager({ clientId: 't', store: new MemoryTokenStore(), endpoints: noEndpoints }), retries: 3, backoff: { initial: 60_000, max: 60_000 } });
  const pending = slow.fetch(new Request(`${BASE}/jobs`, { signal: controller.signal }));
  setTimeout(() => controller.abort(), 20);
  await assert.rejects(pending, (error: Error) => error.name === 'AbortError');
});

test('a non-JSON error body keeps its text; a JSON one gives its "error" text', async () => {
  const { fetch } = scripted(new Response('Bad Gateway from proxy', { status: 502 }), refused(404, 'job job-x not found'));
  const client = transport(fetch);
  await assert.rejects(client.fetch(request('GET', '/jobs')), { name: 'BerthError', status: 502, error: 'Bad Gateway from proxy' });
  await assert.rejects(client.fetch(request('GET', '/jobs/job-x')), (error: BerthError) => {
    assert.equal(error.message, 'job job-x not found');
    assert.deepEqual(error.body, { error: 'job job-x not found', status: 'error' });
    return true;
  });
});

function pair(n: number): IssuedPair {
  return { access_token: `access-${n}`, refresh_token: `refresh-${n}`, expires_in: 3600 };
}

test('an API token is exchanged once, on first need, and open routes get no token', async () => {
  let exchanges = 0;
  const tokens = new TokenManager({
    apiToken: 'api',
    clientId: 'me',
    store: new MemoryTokenStore(),
    endpoints: { ...noEndpoints, exchange: async (apiToken, clientId) => (assert.deepEqual([apiToken, clientId], ['api', 'me']), pair(++exchanges)) },
  });
  const { fetch, sent } = scripted(json(200, {}), json(200, {}), json(200, {}));
  const client = transport(fetch, tokens);
  await client.fetch(request('GET', '/health'));
  await Promise.all([client.fetch(request('GET', '/jobs')), client.fetch(request('GET', '/agents'))]);
  assert.equal(exchanges, 1);
  assert.deepEqual(sent.map((s) => s.authorization), [null, 'Bearer access-1', 'Bearer access-1']);
});

test('a 401 refreshes the pair once for all waiting requests, saves it, and sends them again', async () => {
  let refreshes = 0;
  const saved: (Tokens | undefined)[] = [];
  const store = new MemoryTokenStore({ access_token: 'access-0', refresh_token: 'refresh-0' });
  const tokens = new TokenManager({
    clientId: 'me',
    store: { load: () => store.load(), save: (t) => (saved.push(t), store.save(t)) },
    endpoints: { ...noEndpoints, refresh: async (refreshToken) => (assert.equal(refreshToken, 'refresh-0'), pair(++refreshes)) },
  });
  const expiredOrOk = (request: Request) => (request.headers.get('authorization') === 'Bearer access-0' ? refused(401, 'token expired') : json(200, {}));
  const { fetch, sent } = scripted(expiredOrOk, expiredOrOk, expiredOrOk, expiredOrOk);
  const client = transport(fetch, tokens);
  await Promise.all([client.fetch(request('GET', '/jobs')), client.fetch(request('POST', '/run', { prompt: 'x' }))]);
  assert.equal(refreshes, 1);
  assert.equal(saved.length, 1);
  assert.equal(saved[0]!.refresh_token, 'refresh-1');
  assert.deepEqual(sent.map((s) => s.authorization).sort(), ['Bearer access-0', 'Bearer access-0', 'Bearer access-1', 'Bearer access-1']);
});

test('a refused refresh token empties the store, and the 401 is the error', async () => {
  const store = new MemoryTokenStore({ access_token: 'access-0', refresh_token: 'refresh-0' });
  const tokens = new TokenManager({
    clientId: 'me',
    store,
    endpoints: { ...noEndpoints, refresh: async () => Promise.reject(new BerthError(401, 'token blacklisted')) },
  });
  const { fetch } = scripted(refused(401, 'token expired'));
  await assert.rejects(transport(fetch, tokens).fetch(request('GET', '/jobs')), { name: 'BerthError', status: 401, error: 'token expired' });
  assert.equal(store.load(), undefined);
});

test('a token about to expire is refreshed before it is sent', async () => {
  const store = new MemoryTokenStore({ access_token: 'access-0', refresh_token: 'refresh-0', expires_at: Date.now() + 1000 });
  const tokens = new TokenManager({ clientId: 'me', store, endpoints: { ...noEndpoints, refresh: async () => pair(1) } });
  const { fetch, sent } = scripted(json(200, {}));
  await transport(fetch, tokens).fetch(request('GET', '/jobs'));
  assert.deepEqual(sent.map((s) => s.authorization), ['Bearer access-1']);
  assert.ok(store.load()!.expires_at! > Date.now() + 3_000_000);
});

test('a fixed access token is sent as is and never renewed', async () => {
  const tokens = new TokenManager({ accessToken: 'fixed', clientId: 'me', store: new MemoryTokenStore(), endpoints: noEndpoints });
  const { fetch, sent } = scripted(refused(401, 'token expired'));
  await assert.rejects(transport(fetch, tokens).fetch(request('GET', '/jobs')), { status: 401 });
  assert.deepEqual(sent.map((s) => s.authorization), ['Bearer fixed']);
});

test('a base URL with a path prefix keeps it, and the rules apply to the route below it', async () => {
  const { fetch, sent } = scripted(networkError(), json(200, {}));
  const client = new Transport({ baseUrl: 'http://proxy.test/berth/', fetch, tokens: new TokenManager({ clientId: 't', store: new MemoryTokenStore(), endpoints: noEndpoints }), retries: 1, backoff: { initial: 1, max: 1 } });
  await client.fetch(new Request('http://proxy.test/berth/jobs'));
  assert.deepEqual(sent.map((s) => s.path), ['/berth/jobs', '/berth/jobs']);
});

/** An unsigned JWT-shaped token: only its payload is read by the client. */
function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'HS256' })}.${part(claims)}.signature`;
}

test('a fresh short-lived token is not refreshed at once: the margin shrinks to a quarter of its life', async () => {
  const iat = Math.floor(Date.now() / 1000);
  const access = jwt({ sub: 'me', iat, exp: iat + 2 });
  const store = new MemoryTokenStore({ access_token: access, refresh_token: 'refresh-0', expires_at: Date.now() + 1900 });
  const tokens = new TokenManager({ clientId: 'me', store, endpoints: noEndpoints });
  const { fetch, sent } = scripted(json(200, {}));
  await transport(fetch, tokens).fetch(request('GET', '/jobs'));
  assert.deepEqual(sent.map((s) => s.authorization), [`Bearer ${access}`]);
});

test('a streamed upload is sent once as it is: not cloned, not sent again after 503 or a network error', async () => {
  let pulls = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulls += 1;
      if (pulls > 3) controller.close();
      else controller.enqueue(new Uint8Array(1024));
    },
  });
  const upload = new Request(`${BASE}/workspaces/w/files/big`, { method: 'PUT', body, duplex: 'half' } as RequestInit);
  const received: number[] = [];
  const { fetch, sent } = scripted(async (request) => {
    assert.equal(request, upload, 'the request itself, not a clone (a clone tees the body and keeps a copy)');
    received.push((await request.arrayBuffer()).byteLength);
    return refused(503, 'container runtime unavailable: x');
  });
  await assert.rejects(transport(fetch).sendOnce(upload), (error: unknown) => error instanceof BerthError && error.status === 503);
  assert.equal(sent.length, 1);
  assert.deepEqual(received, [3072]);

  const again = scripted(networkError());
  await assert.rejects(transport(again.fetch).sendOnce(new Request(`${BASE}/workspaces/w/archive`, { method: 'POST', body: 'x' })), BerthNetworkError);
  assert.equal(again.sent.length, 1);
});
