// @berth/client's version handshake against a fake Berth (a real HTTP server answering GET /version with a
// chosen api_version): the SDK asks once, before its first call, and fails clearly when the major versions
// differ; version() and health() stay reachable; warn mode goes on; no answer decides nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_VERSION, Berth, BerthVersionError, apiVersionsFit, type BerthOptions } from '../../packages/client/src/index.js';
import { API_VERSION as SERVER_API_VERSION } from '../../src/version.js';

interface FakeBerth {
  readonly url: string;
  /** Every request's method and path, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

/** A server that answers /version with `apiVersion` (`/version` handled by `version` when given) and {} elsewhere. */
async function fakeBerth(apiVersion: string, version?: (request: IncomingMessage, response: ServerResponse, count: number) => boolean): Promise<FakeBerth> {
  const requests: string[] = [];
  let versionCount = 0;
  const server = createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    if (request.url === '/version') {
      versionCount += 1;
      if (version?.(request, response, versionCount)) return;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ version: '9.9.9', api_version: apiVersion, engine_version: 'x', engine_image: 'e', agent_image: 'a' }));
      return;
    }
    if (request.url === '/secrets') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ secrets: [] }));
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: 'berth', version: '9.9.9', status: 'ok', components: [] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const client = (url: string, options: Partial<BerthOptions> = {}) => new Berth({ url, accessToken: 'token', ...options });

test("the SDK speaks the server's API version (src/version.ts): a change of one is a change of both", () => {
  assert.equal(API_VERSION, SERVER_API_VERSION);
});

test('versions fit when their major versions are equal', () => {
  assert.equal(apiVersionsFit('1', '1'), true);
  assert.equal(apiVersionsFit('1', '1.4'), true);
  assert.equal(apiVersionsFit('1.2', '1'), true);
  assert.equal(apiVersionsFit('1', '2'), false);
  assert.equal(apiVersionsFit('2', '1.9'), false);
  assert.equal(apiVersionsFit('1', '11'), false);
  assert.equal(apiVersionsFit('1', ''), false);
  assert.equal(apiVersionsFit('1', 'v1'), false);
});

test('a server of another major version fails the call with a message naming both versions, before the call is sent', async (t) => {
  const fake = await fakeBerth('2');
  t.after(() => fake.close());
  const berth = client(fake.url);
  const error = await berth.secrets().then(
    () => assert.fail('the call succeeded'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof BerthVersionError, String(error));
  assert.equal(error.serverApiVersion, '2');
  assert.equal(error.clientApiVersion, API_VERSION);
  assert.match(error.message, new RegExp(`Berth at ${fake.url} speaks API version 2, and this @berth/client speaks API version 1: they do not fit`));
  // Later calls fail the same way without asking again; nothing but /version ever reached the server.
  await assert.rejects(berth.sessions.list(), BerthVersionError);
  assert.deepEqual(fake.requests, ['GET /version']);
});

test('version() and health() stay reachable when the versions do not fit', async (t) => {
  const fake = await fakeBerth('2');
  t.after(() => fake.close());
  const berth = client(fake.url);
  assert.equal((await berth.version()).api_version, '2');
  assert.equal((await berth.health()).status, 'ok');
  assert.deepEqual(fake.requests, ['GET /version', 'GET /health']);
});

test('a server of the same major version is asked once, by concurrent first calls together', async (t) => {
  const fake = await fakeBerth(`${API_VERSION}.7`);
  t.after(() => fake.close());
  const berth = client(fake.url);
  await Promise.all([berth.secrets(), berth.secrets()]);
  await berth.secrets();
  assert.deepEqual(fake.requests, ['GET /version', 'GET /secrets', 'GET /secrets', 'GET /secrets']);
});

test("warn mode tells onWarning once and sends the calls", async (t) => {
  const fake = await fakeBerth('3');
  t.after(() => fake.close());
  const warnings: string[] = [];
  const berth = client(fake.url, { apiVersionCheck: 'warn', onWarning: (message) => warnings.push(message) });
  await berth.secrets();
  await berth.secrets();
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /speaks API version 3, and this @berth\/client speaks API version 1/);
  assert.deepEqual(fake.requests, ['GET /version', 'GET /secrets', 'GET /secrets']);
});

test('off mode never asks', async (t) => {
  const fake = await fakeBerth('2');
  t.after(() => fake.close());
  await client(fake.url, { apiVersionCheck: 'off' }).secrets();
  assert.deepEqual(fake.requests, ['GET /secrets']);
});

test('a /version that answers an error is taken as unknown: the calls go on, and it is not asked again', async (t) => {
  const fake = await fakeBerth('2', (_request, response) => {
    response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found","status":"error"}');
    return true;
  });
  t.after(() => fake.close());
  const berth = client(fake.url);
  await berth.secrets();
  await berth.secrets();
  assert.deepEqual(fake.requests, ['GET /version', 'GET /secrets', 'GET /secrets']);
});

test('a check that got no answer lets the call go on and is made again at the next call', async (t) => {
  const fake = await fakeBerth('2', (request, _response, count) => {
    if (count > 1) return false;
    request.socket.destroy();
    return true;
  });
  t.after(() => fake.close());
  const berth = client(fake.url, { retries: 0 });
  await berth.secrets();
  await assert.rejects(berth.secrets(), BerthVersionError);
  assert.deepEqual(fake.requests, ['GET /version', 'GET /secrets', 'GET /version']);
});

test('an aborted call waiting for the check rejects with its abort reason', async (t) => {
  let answer: (() => void) | undefined;
  const fake = await fakeBerth('1', (_request, response) => {
    answer = () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"api_version":"1"}');
    return true;
  });
  t.after(async () => {
    answer?.();
    await fake.close();
  });
  const controller = new AbortController();
  const call = client(fake.url).secrets({ signal: controller.signal });
  while (fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  controller.abort(new Error('stop'));
  await assert.rejects(call, /stop/);
});
