// WebhookDeliverer against a real local HTTP server: signatures on the wire, retries with back-off on
// 5xx, network errors and timeouts, no retry on 4xx, a stop when the caller aborts, and the destination
// rule applied to the address each attempt connects to.
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { WebhookDeliverer, type WebhookSettings } from '../../src/core/webhooks/deliverer.js';
import { DestinationPolicy, type Lookup } from '../../src/core/webhooks/destination-policy.js';
import { verifySignature } from '../../src/core/webhooks/signer.js';

const SECRET = 'deliverer-test-secret';

interface Received {
  readonly at: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

let server: Server;
let url: string;
let received: Received[] = [];
/** Status (or behaviour) per attempt; the last entry repeats. */
let answers: (number | 'hang')[] = [200];

before(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ at: Date.now(), headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const answer = answers[Math.min(received.length - 1, answers.length - 1)]!;
      if (answer === 'hang') return; // never answers; the deliverer's timeout must fire
      res.writeHead(answer).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
const deliverers: WebhookDeliverer[] = [];
after(async () => {
  await Promise.all(deliverers.map((d) => d.close()));
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  received = [];
  answers = [200];
  server.closeAllConnections();
});

/** The receiver listens on loopback, which webhooks may target only when the setting names it. */
const allowingLoopback = new DestinationPolicy(loadConfig({ SERVICE_AUTH_ENABLED: 'false', SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' }).webhooks.allowedHosts);

function deliverer(settings: Partial<WebhookSettings> = {}, outcomes: string[] = [], destinations = allowingLoopback) {
  const created = new WebhookDeliverer(
    { signingSecret: SECRET, maxRetries: 3, retryBaseDelayMs: 50, timeoutMs: 2_000, ...settings },
    { userAgent: 'Berth/test', observer: { attempt: (outcome) => outcomes.push(outcome) }, destinations },
  );
  deliverers.push(created);
  return created;
}

/** A resolver that knows only these names (the system's resolver knows none of them). */
function resolver(answers: Record<string, string[]>): Lookup {
  return (hostname, _options, callback) => {
    const found = answers[hostname];
    if (found === undefined) return callback(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), []);
    callback(null, found.map((address): LookupAddress => ({ address, family: 4 })));
  };
}

const BODY = JSON.stringify({ event: 'job.finished', job_id: 'job-1', status: 'completed', output: 'ünïcode ✓' });
const never = new AbortController().signal;

describe('WebhookDeliverer', () => {
  it('POSTs the body as JSON with a signature the receiver can verify', async () => {
    const result = await deliverer().deliver({ url, body: BODY, timestamp: 1700000000 }, never);
    assert.deepEqual(result, { outcome: 'delivered', attempts: 1, status: 200 });
    const [request] = received;
    assert.equal(request!.body, BODY);
    assert.equal(request!.headers['content-type'], 'application/json');
    assert.equal(request!.headers['x-service-timestamp'], '1700000000');
    assert.equal(verifySignature(SECRET, request!.headers['x-service-timestamp'] as string, request!.headers['x-service-signature'] as string, request!.body), true);
  });

  it('sends no signature headers when the secret is empty', async () => {
    await deliverer({ signingSecret: '' }).deliver({ url, body: BODY, timestamp: 1700000000 }, never);
    assert.equal(received[0]!.headers['x-service-signature'], undefined);
    assert.equal(received[0]!.headers['x-service-timestamp'], undefined);
  });

  it('retries a 5xx with the same body, timestamp and signature, waiting base × 2^n', async () => {
    answers = [503, 500, 200];
    const outcomes: string[] = [];
    const result = await deliverer({ retryBaseDelayMs: 100 }, outcomes).deliver({ url, body: BODY, timestamp: 1700000000 }, never);
    assert.equal(result.outcome, 'delivered');
    assert.equal(received.length, 3);
    for (const request of received) {
      assert.equal(request.body, BODY);
      assert.equal(request.headers['x-service-timestamp'], received[0]!.headers['x-service-timestamp']);
      assert.equal(request.headers['x-service-signature'], received[0]!.headers['x-service-signature']);
    }
    const gaps = [received[1]!.at - received[0]!.at, received[2]!.at - received[1]!.at];
    assert.ok(gaps[0]! >= 95 && gaps[0]! < 1_000, `first wait ${gaps[0]} ms, expected about 100`);
    assert.ok(gaps[1]! >= 195 && gaps[1]! < 1_100, `second wait ${gaps[1]} ms, expected about 200`);
    assert.deepEqual(outcomes, ['retried', 'retried', 'delivered']);
  });

  it('does not retry a 4xx', async () => {
    answers = [400];
    const outcomes: string[] = [];
    const result = await deliverer({}, outcomes).deliver({ url, body: BODY, timestamp: 1 }, never);
    assert.deepEqual(result, { outcome: 'failed', attempts: 1, reason: 'answered HTTP 400' });
    assert.equal(received.length, 1);
    assert.deepEqual(outcomes, ['failed']);
  });

  it('does not follow a redirect', async () => {
    answers = [302];
    const result = await deliverer().deliver({ url, body: BODY, timestamp: 1 }, never);
    assert.equal(result.outcome, 'failed');
    assert.equal(received.length, 1);
  });

  it('gives up after maxRetries retries of a 5xx', async () => {
    answers = [502];
    const outcomes: string[] = [];
    const result = await deliverer({ maxRetries: 2, retryBaseDelayMs: 10 }, outcomes).deliver({ url, body: BODY, timestamp: 1 }, never);
    assert.deepEqual(result, { outcome: 'failed', attempts: 3, reason: 'answered HTTP 502' });
    assert.equal(received.length, 3);
    assert.deepEqual(outcomes, ['retried', 'retried', 'failed']);
  });

  it('retries a connection that is refused', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/hook`;
    await new Promise((resolve) => closed.close(resolve));
    const result = await deliverer({ maxRetries: 2, retryBaseDelayMs: 10 }).deliver({ url: deadUrl, body: BODY, timestamp: 1 }, never);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.attempts, 3);
    assert.match((result as { reason: string }).reason, /ECONNREFUSED/);
  });

  it('times out an attempt that gets no answer, and retries it', async () => {
    answers = ['hang', 200];
    const started = Date.now();
    const result = await deliverer({ timeoutMs: 300, retryBaseDelayMs: 10 }).deliver({ url, body: BODY, timestamp: 1 }, never);
    assert.equal(result.outcome, 'delivered');
    assert.equal(received.length, 2);
    assert.ok(Date.now() - started >= 290);
  });

  it('stops when the caller aborts during the back-off', async () => {
    answers = [503];
    const controller = new AbortController();
    const delivering = deliverer({ retryBaseDelayMs: 5_000 }).deliver({ url, body: BODY, timestamp: 1 }, controller.signal);
    while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    assert.deepEqual(await delivering, { outcome: 'aborted', attempts: 1 });
  });
});

describe('WebhookDeliverer and the destination rule', () => {
  const port = () => new URL(url).port;

  it('connects to the address the policy resolved and checked, not to one the system would resolve', async () => {
    const pinned = new DestinationPolicy(['hooks.internal'], resolver({ 'hooks.internal': ['127.0.0.1'] }));
    const result = await deliverer({}, [], pinned).deliver({ url: `http://hooks.internal:${port()}/hook`, body: BODY, timestamp: 1 }, never);
    assert.deepEqual(result, { outcome: 'delivered', attempts: 1, status: 200 });
    assert.equal(received[0]!.headers.host, `hooks.internal:${port()}`);
  });

  it('a name that resolves to an internal address at delivery fails at once, without retries or a request', async () => {
    const outcomes: string[] = [];
    const rebound = new DestinationPolicy([], resolver({ 'rebind.example': ['127.0.0.1'] }));
    const result = await deliverer({ maxRetries: 5, retryBaseDelayMs: 10 }, outcomes, rebound).deliver({ url: `http://rebind.example:${port()}/hook`, body: BODY, timestamp: 1 }, never);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.attempts, 1);
    assert.match((result as { reason: string }).reason, /rebind\.example resolves to 127\.0\.0\.1, an internal address/);
    assert.deepEqual(outcomes, ['failed']);
    assert.equal(received.length, 0);
  });

  it('a literal internal address fails at once when the setting does not name it', async () => {
    const outcomes: string[] = [];
    const result = await deliverer({ maxRetries: 5, retryBaseDelayMs: 10 }, outcomes, new DestinationPolicy([])).deliver({ url, body: BODY, timestamp: 1 }, never);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.attempts, 1);
    assert.match((result as { reason: string }).reason, /127\.0\.0\.1 is an internal address/);
    assert.deepEqual(outcomes, ['failed']);
    assert.equal(received.length, 0);
  });
});
