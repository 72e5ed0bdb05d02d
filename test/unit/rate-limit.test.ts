import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { ConfigError } from '../../src/config.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import {
  TokenBucketLimiter,
  bucketKey,
  clientIp,
  normaliseIp,
  parseTrustedProxies,
  registerRateLimit,
} from '../../src/http/plugins/rate-limit.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';

describe('TokenBucketLimiter', () => {
  it('allows a burst of `burst` requests, then refuses', () => {
    const limiter = new TokenBucketLimiter({ rps: 1, burst: 3, now: () => 0 });
    assert.deepEqual([1, 2, 3, 4].map(() => limiter.take('a').allowed), [true, true, true, false]);
  });

  it('reports the whole tokens remaining, floored at zero', () => {
    const limiter = new TokenBucketLimiter({ rps: 1, burst: 3, now: () => 0 });
    assert.deepEqual([1, 2, 3, 4, 5].map(() => limiter.take('a').remaining), [2, 1, 0, 0, 0]);
  });

  it('refills from the elapsed time at rps tokens per second', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ rps: 2, burst: 2, now: () => now });
    limiter.take('a');
    limiter.take('a');
    assert.equal(limiter.take('a').allowed, false);
    now += 499;
    assert.equal(limiter.take('a').allowed, false);
    now += 1;
    assert.equal(limiter.take('a').allowed, true);
  });

  it('never holds more than burst tokens however long the client was idle', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ rps: 10, burst: 2, now: () => now });
    limiter.take('a');
    now += 3_600_000;
    assert.equal(limiter.take('a').remaining, 1);
  });

  it('keeps clients apart', () => {
    const limiter = new TokenBucketLimiter({ rps: 1, burst: 1, now: () => 0 });
    assert.equal(limiter.take('a').allowed, true);
    assert.equal(limiter.take('a').allowed, false);
    assert.equal(limiter.take('b').allowed, true);
  });

  it('says how long until the next token when refusing', () => {
    const limiter = new TokenBucketLimiter({ rps: 0.5, burst: 1, now: () => 0 });
    limiter.take('a');
    assert.equal(limiter.take('a').retryAfterMs, 2000);
  });

  it('refuses nonsensical settings at construction', () => {
    assert.throws(() => new TokenBucketLimiter({ rps: 0, burst: 1 }));
    assert.throws(() => new TokenBucketLimiter({ rps: 1, burst: 0 }));
    assert.throws(() => new TokenBucketLimiter({ rps: 1, burst: 1.5 }));
    assert.throws(() => new TokenBucketLimiter({ rps: 1, burst: 1, maxBuckets: 0 }));
  });

  it('keeps at most maxBuckets buckets under a flood of 100k distinct addresses', () => {
    const limiter = new TokenBucketLimiter({ rps: 10, burst: 20, maxBuckets: 10_000, now: () => 0 });
    for (let i = 0; i < 100_000; i += 1) limiter.take(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    assert.ok(limiter.size <= 10_000, `size ${limiter.size}`);
  });

  it('gives a client that was idle longer than the refill time a full bucket again', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ rps: 10, burst: 20, now: () => now });
    for (let i = 0; i < 20; i += 1) limiter.take('a');
    assert.equal(limiter.take('a').allowed, false);
    now += 2_001;
    assert.equal(limiter.take('a').remaining, 19);
  });
});

describe('parseTrustedProxies', () => {
  it('accepts bare IPv4 and IPv6 addresses and CIDRs of both families', () => {
    const list = parseTrustedProxies(['10.0.0.1', '192.168.0.0/16', '::1', 'fd00::/8']);
    assert.equal(list.check('10.0.0.1', 'ipv4'), true);
    assert.equal(list.check('10.0.0.2', 'ipv4'), false);
    assert.equal(list.check('192.168.44.3', 'ipv4'), true);
    assert.equal(list.check('::1', 'ipv6'), true);
    assert.equal(list.check('fd12:3456::1', 'ipv6'), true);
    assert.equal(list.check('fe80::1', 'ipv6'), false);
  });

  it('refuses an entry that is not an address or CIDR, naming the variable', () => {
    for (const entry of ['proxy.local', '10.0.0.0/33', '::/129', '10.0.0.0/8/8', '10.0.0.0/x', '10.0.0']) {
      assert.throws(
        () => parseTrustedProxies([entry]),
        (error: unknown) => error instanceof ConfigError && error.message.startsWith('SERVICE_RATE_LIMIT_TRUSTED_PROXIES:'),
        entry,
      );
    }
  });
});

describe('clientIp', () => {
  const trusted = parseTrustedProxies(['10.0.0.0/8', '2001:db8:1::/48']);

  it('is the peer when the peer is not a trusted proxy, whatever X-Forwarded-For says', () => {
    assert.equal(clientIp('203.0.113.9', '1.2.3.4', trusted), '203.0.113.9');
  });

  it('is the leftmost X-Forwarded-For entry when the peer is a trusted proxy', () => {
    assert.equal(clientIp('10.1.2.3', '198.51.100.7, 10.9.9.9', trusted), '198.51.100.7');
  });

  it('trusts IPv6 peers inside an IPv6 CIDR', () => {
    assert.equal(clientIp('2001:db8:1:ff::5', '198.51.100.7', trusted), '198.51.100.7');
    assert.equal(clientIp('2001:db8:2::5', '198.51.100.7', trusted), '2001:db8:2::5');
  });

  it('falls back to the peer when the forwarded entry is not an IP address', () => {
    assert.equal(clientIp('10.1.2.3', 'unknown, 198.51.100.7', trusted), '10.1.2.3');
    assert.equal(clientIp('10.1.2.3', '', trusted), '10.1.2.3');
    assert.equal(clientIp('10.1.2.3', '198.51.100.7:443', trusted), '10.1.2.3');
  });

  it('uses the first header when X-Forwarded-For is repeated', () => {
    assert.equal(clientIp('10.1.2.3', ['198.51.100.7', '198.51.100.8'], trusted), '198.51.100.7');
  });

  it('normalises IPv4-mapped IPv6 addresses of peers and forwarded entries', () => {
    assert.equal(clientIp('::ffff:203.0.113.9', undefined, trusted), '203.0.113.9');
    assert.equal(clientIp('::ffff:10.1.2.3', '::FFFF:198.51.100.7', trusted), '198.51.100.7');
  });

  it('puts peers without an address in one shared bucket', () => {
    assert.equal(clientIp(undefined, '1.2.3.4', trusted), 'unknown');
  });
});

describe('bucketKey', () => {
  it('is the address for IPv4', () => {
    assert.equal(bucketKey('203.0.113.9'), '203.0.113.9');
  });

  it('is the /64 network for IPv6, however the address is written', () => {
    assert.equal(bucketKey('2001:db8:0:1::1'), '2001:db8:0:1::/64');
    assert.equal(bucketKey('2001:0db8:0000:0001:ffff:ffff:ffff:ffff'), '2001:db8:0:1::/64');
    assert.equal(bucketKey('2001:db8::'), '2001:db8:0:0::/64');
    assert.equal(bucketKey('::1'), '0:0:0:0::/64');
    assert.equal(bucketKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64');
    assert.equal(bucketKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  });

  it('normalises brackets and case', () => {
    assert.equal(normaliseIp('[2001:DB8::1]'), '2001:db8::1');
  });
});

async function limitedApp(options: { trustedProxies?: string[]; burst?: number } = {}): Promise<{ app: FastifyInstance; metrics: Metrics }> {
  const metrics = createMetrics();
  const app = Fastify();
  registerErrorHandler(app);
  registerRateLimit(app, { rps: 0.001, burst: options.burst ?? 2, trustedProxies: options.trustedProxies ?? [], metrics });
  app.get('/health', async () => ({ status: 'ok' }));
  await app.ready();
  return { app, metrics };
}

describe('registerRateLimit', () => {
  it('answers 429 with the error body once the bucket is empty', async () => {
    const { app } = await limitedApp();
    await app.inject({ url: '/health' });
    await app.inject({ url: '/health' });
    const refused = await app.inject({ url: '/health' });
    assert.equal(refused.statusCode, 429);
    assert.deepEqual(refused.json(), { error: 'rate limit exceeded; slow down and retry later', status: 'error' });
    assert.ok(Number(refused.headers['retry-after']) >= 1);
  });

  it('sends X-RateLimit-Remaining on every limited response, 429 included', async () => {
    const { app } = await limitedApp();
    const seen = [];
    for (let i = 0; i < 4; i += 1) seen.push((await app.inject({ url: '/health' })).headers['x-ratelimit-remaining']);
    assert.deepEqual(seen, ['1', '0', '0', '0']);
  });

  it('limits URLs that match no route too', async () => {
    const { app } = await limitedApp({ burst: 1 });
    assert.equal((await app.inject({ url: '/nope' })).statusCode, 404);
    assert.equal((await app.inject({ url: '/nope' })).statusCode, 429);
  });

  it('counts refusals in berth_rate_limited_total', async () => {
    const { app, metrics } = await limitedApp({ burst: 1 });
    await app.inject({ url: '/health' });
    await app.inject({ url: '/health' });
    await app.inject({ url: '/health' });
    assert.equal((await metrics.rateLimited.get()).values[0]?.value, 2);
  });

  it('ignores a spoofed X-Forwarded-For from an untrusted peer: the bucket stays the peer\'s', async () => {
    const { app } = await limitedApp({ burst: 2 });
    const from = (xff: string) => app.inject({ url: '/health', remoteAddress: '203.0.113.9', headers: { 'x-forwarded-for': xff } });
    assert.equal((await from('1.1.1.1')).statusCode, 200);
    assert.equal((await from('2.2.2.2')).statusCode, 200);
    const third = await from('3.3.3.3');
    assert.equal(third.statusCode, 429);
  });

  it('uses X-Forwarded-For from a trusted proxy: each forwarded client has its own bucket', async () => {
    const { app } = await limitedApp({ burst: 1, trustedProxies: ['10.0.0.0/8'] });
    const via = (xff: string) => app.inject({ url: '/health', remoteAddress: '10.0.0.5', headers: { 'x-forwarded-for': xff } });
    assert.equal((await via('198.51.100.1')).statusCode, 200);
    assert.equal((await via('198.51.100.2')).statusCode, 200);
    assert.equal((await via('198.51.100.1')).statusCode, 429);
  });

  it('uses X-Forwarded-For from a trusted IPv6 proxy', async () => {
    const { app } = await limitedApp({ burst: 1, trustedProxies: ['fd00::/8'] });
    const via = (xff: string) => app.inject({ url: '/health', remoteAddress: 'fd00::1', headers: { 'x-forwarded-for': xff } });
    assert.equal((await via('198.51.100.1')).statusCode, 200);
    assert.equal((await via('198.51.100.2')).statusCode, 200);
  });

  it('treats an IPv4-mapped peer as the IPv4 address', async () => {
    const { app } = await limitedApp({ burst: 1 });
    assert.equal((await app.inject({ url: '/health', remoteAddress: '::ffff:203.0.113.9' })).statusCode, 200);
    assert.equal((await app.inject({ url: '/health', remoteAddress: '203.0.113.9' })).statusCode, 429);
  });

  it('refuses an invalid trusted-proxy entry at registration', () => {
    assert.throws(
      () => registerRateLimit(Fastify(), { rps: 1, burst: 1, trustedProxies: ['not-an-ip'], metrics: createMetrics() }),
      ConfigError,
    );
  });
});
