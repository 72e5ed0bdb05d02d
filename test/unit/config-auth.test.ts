import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';

const STRONG = 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%';

function load(env: Record<string, string>) {
  return loadConfig({ SERVICE_JWT_SECRET: STRONG, ...env });
}

function refuses(env: Record<string, string>, variable: string): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => error instanceof ConfigError && error.variable === variable && error.message.startsWith(`${variable}:`),
    JSON.stringify(env),
  );
}

describe('SERVICE_JWT_SECRET', () => {
  it('is required when authentication is on (the default)', () => {
    refuses({}, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: '' }, 'SERVICE_JWT_SECRET');
  });

  it('must be at least 32 characters', () => {
    refuses({ SERVICE_JWT_SECRET: 'kQ7#mZ2$pL9!xW4@' }, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: STRONG.slice(0, 31) }, 'SERVICE_JWT_SECRET');
    assert.equal(load({ SERVICE_JWT_SECRET: STRONG }).auth.jwtSecret, STRONG);
  });

  it('refuses known placeholders, however long', () => {
    for (const secret of [
      'changemechangemechangemechangeme',
      'your-secret-key-your-secret-key-your-secret-key',
      'please-change-me-before-production-use',
      'secretsecretsecretsecretsecretsecret',
      'your-256-bit-secret-your-256-bit-secret',
    ]) {
      refuses({ SERVICE_JWT_SECRET: secret }, 'SERVICE_JWT_SECRET');
    }
  });

  it('refuses secrets made of repeated characters', () => {
    refuses({ SERVICE_JWT_SECRET: 'a'.repeat(64) }, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: 'ab'.repeat(32) }, 'SERVICE_JWT_SECRET');
  });

  it('refuses long but low-entropy secrets: repetitions and runs of neighbouring characters', () => {
    refuses({ SERVICE_JWT_SECRET: 'secretsecretsecretsecretsecretse' }, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: '0123456789abcdef0123456789abcdef' }, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: 'abcdefghijklmnopqrstuvwxyzABCDEF' }, 'SERVICE_JWT_SECRET');
    refuses({ SERVICE_JWT_SECRET: 'qwertyuiqwertyuiqwertyuiqwertyui' }, 'SERVICE_JWT_SECRET');
    assert.doesNotThrow(() => load({ SERVICE_JWT_SECRET: '3f9a1c7e5b2d8046af13c9e7d5b2084f6a1c3e5b7d9f0a2c4e6b8d0f1a3c5e7b' }));
  });

  it('says how to make a good one', () => {
    assert.throws(() => loadConfig({ SERVICE_JWT_SECRET: 'x'.repeat(40) }), /openssl rand/);
  });

  it('may be empty when authentication is disabled', () => {
    const config = loadConfig({ SERVICE_AUTH_ENABLED: 'false' });
    assert.equal(config.auth.enabled, false);
    assert.equal(config.auth.jwtSecret, '');
  });
});

describe('authentication settings', () => {
  it('has secure defaults', () => {
    const { auth } = load({});
    assert.equal(auth.enabled, true);
    assert.deepEqual(auth.apiTokens, []);
    assert.equal(auth.accessTtlMs, 24 * 3_600_000);
    assert.equal(auth.refreshTtlMs, 7 * 24 * 3_600_000);
    assert.equal(auth.blacklistBackend, 'memory');
    assert.ok(auth.blacklistBoltPath.endsWith('/blacklist.db'));
    assert.equal(auth.blacklistCleanupIntervalMs, 3_600_000);
  });

  it('reads SERVICE_API_TOKENS as a comma-separated list, trimming blanks', () => {
    const [one, two] = ['k3Vq9ZpX2mLw7RtY', 'Hd8sJf2Lq0Wz5Nc4Bx'];
    assert.deepEqual(load({ SERVICE_API_TOKENS: ` ${one}, ${two} ,, ` }).auth.apiTokens.map((entry) => entry.token), [one, two]);
  });

  it('reads name:token entries: the name is the identity of the callers the token signs in', () => {
    const [one, two] = ['k3Vq9ZpX2mLw7RtY', 'Hd8sJf2Lq0Wz5Nc4Bx'];
    const { apiTokens } = load({ SERVICE_API_TOKENS: `alice:${one}, ci.bot-2 : ${two}` }).auth;
    assert.deepEqual(apiTokens.map(({ identity, token, named }) => ({ identity, token, named })), [
      { identity: 'alice', token: one, named: true },
      { identity: 'ci.bot-2', token: two, named: true },
    ]);
  });

  it('gives each bare token its own identity, token:<fingerprint>, which is not the token', () => {
    const [one, two] = ['k3Vq9ZpX2mLw7RtY', 'Hd8sJf2Lq0Wz5Nc4Bx'];
    const [first, second] = load({ SERVICE_API_TOKENS: `${one},bob:x${two},${two}` }).auth.apiTokens.filter((entry) => !entry.named);
    assert.match(first!.identity, /^token:[0-9a-f]{12}$/);
    assert.notEqual(first!.identity, second!.identity);
    assert.equal(load({ SERVICE_API_TOKENS: one }).auth.apiTokens[0]!.identity, first!.identity, 'the same token, the same identity');
    assert.ok(!first!.identity.includes(one.slice(0, 6)));
    assert.equal(first!.identity, `token:${first!.fingerprint}`);
  });

  it('keeps everything after the first ":" as the token', () => {
    assert.deepEqual(load({ SERVICE_API_TOKENS: 'alice:k3Vq9Z:pX2mLw7RtY' }).auth.apiTokens.map(({ identity, token }) => ({ identity, token })), [{ identity: 'alice', token: 'k3Vq9Z:pX2mLw7RtY' }]);
  });

  it('refuses an invalid or repeated name, or a repeated token, naming the entry by position and never echoing it', () => {
    const token = 'k3Vq9ZpX2mLw7RtY';
    const cases: [string, RegExp][] = [
      [`-alice:${token}`, /entry 1 of 1 has a name/],
      [`:${token}`, /entry 1 of 1 has a name/],
      [`al ice:${token}`, /entry 1 of 1 has a name/],
      [`al/ice:${token}`, /entry 1 of 1 has a name/],
      [`${'a'.repeat(65)}:${token}`, /entry 1 of 1 has a name/],
      [`zed-secret-prefix:`, /entry 1 of 1 has a name but no token/],
      [`alice:${token},bob:Hd8sJf2Lq0Wz5Nc4Bx,ALICE:Pq7rT2vX9zB4nM6k`, /entry 3 of 3 repeats the name of entry 1/],
      [`alice:${token},bob:${token}`, /entry 2 of 2 repeats the token of entry 1/],
      [`${token},bob:${token}`, /entry 2 of 2 repeats the token of entry 1/],
    ];
    for (const [value, message] of cases) {
      refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_API_TOKENS: value }, 'SERVICE_API_TOKENS');
      assert.throws(() => load({ SERVICE_API_TOKENS: value }), (error: Error) => {
        assert.match(error.message, message);
        assert.ok(!error.message.includes(token), 'the token is never echoed');
        assert.ok(!/alice|zed-secret|al ice|al\/ice/i.test(error.message), 'nor the name (it may be part of an old token)');
        return true;
      });
    }
  });

  it('checks the strength of the token part of a named entry', () => {
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_API_TOKENS: 'alice:short' }, 'SERVICE_API_TOKENS');
    assert.throws(() => load({ SERVICE_API_TOKENS: 'alice:aaaaaaaaaaaaaaaaaaaaaaaa' }), /token 1 of 1 uses only 1 distinct/);
  });

  it('refuses weak API tokens at start, naming the variable and never the token', () => {
    for (const token of ['test', 'tok-a', 'aaaaaaaaaaaaaaaaaaaaaaaa', 'abcdefghijklmnopqrstuvwx', '0123456789abcdef0123456789abcdef', 'changeme-changeme-changeme']) {
      refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_API_TOKENS: `k3Vq9ZpX2mLw7RtY,${token}` }, 'SERVICE_API_TOKENS');
      assert.throws(() => load({ SERVICE_API_TOKENS: token }), (error: Error) => !error.message.includes(token) || token.length < 5);
    }
    assert.doesNotThrow(() => load({ SERVICE_API_TOKENS: 'berth-local-8f2c1e9a47b3d6c05e1f2a3b4c5d6e7f' }));
  });

  it('reads the token lifetimes as durations', () => {
    const { auth } = load({ SERVICE_JWT_EXPIRY: '15m', SERVICE_JWT_REFRESH_EXPIRY: '30d' });
    assert.equal(auth.accessTtlMs, 15 * 60_000);
    assert.equal(auth.refreshTtlMs, 30 * 86_400_000);
  });

  it('refuses a lifetime that is not a duration', () => {
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_JWT_EXPIRY: '24' }, 'SERVICE_JWT_EXPIRY');
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_JWT_REFRESH_EXPIRY: 'forever' }, 'SERVICE_JWT_REFRESH_EXPIRY');
  });

  it('reads the blacklist backend, path and cleanup interval', () => {
    const { auth } = load({
      SERVICE_AUTH_BLACKLIST_BACKEND: 'bolt',
      SERVICE_AUTH_BLACKLIST_BOLT_PATH: '/var/lib/berth/bl.db',
      SERVICE_AUTH_BLACKLIST_CLEANUP_INTERVAL: '10m',
    });
    assert.equal(auth.blacklistBackend, 'bolt');
    assert.equal(auth.blacklistBoltPath, '/var/lib/berth/bl.db');
    assert.equal(auth.blacklistCleanupIntervalMs, 600_000);
  });

  it('refuses an unknown blacklist backend', () => {
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_AUTH_BLACKLIST_BACKEND: 'redis' }, 'SERVICE_AUTH_BLACKLIST_BACKEND');
  });

  it('refuses a SERVICE_AUTH_ENABLED that is not a boolean', () => {
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_AUTH_ENABLED: 'maybe' }, 'SERVICE_AUTH_ENABLED');
  });
});

describe('rate-limit and metrics settings', () => {
  it('defaults to enabled, 10 requests per second, burst 20, no trusted proxies, metrics on 127.0.0.1:9090', () => {
    const config = load({});
    assert.deepEqual(config.rateLimit, { enabled: true, rps: 10, burst: 20, trustedProxies: [] });
    assert.deepEqual(config.metricsAddress, { host: '127.0.0.1', port: 9090 });
  });

  it('reads every rate-limit variable', () => {
    const config = load({
      SERVICE_RATE_LIMIT_ENABLED: 'false',
      SERVICE_RATE_LIMIT_RPS: '2.5',
      SERVICE_RATE_LIMIT_BURST: '5',
      SERVICE_RATE_LIMIT_TRUSTED_PROXIES: '10.0.0.0/8, ::1',
    });
    assert.deepEqual(config.rateLimit, { enabled: false, rps: 2.5, burst: 5, trustedProxies: ['10.0.0.0/8', '::1'] });
  });

  it('refuses a zero burst or a non-numeric rate', () => {
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_RATE_LIMIT_BURST: '0' }, 'SERVICE_RATE_LIMIT_BURST');
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_RATE_LIMIT_RPS: 'fast' }, 'SERVICE_RATE_LIMIT_RPS');
  });

  it('reads SERVICE_METRICS_ADDRESS, IPv6 included', () => {
    assert.deepEqual(load({ SERVICE_METRICS_ADDRESS: '[::1]:9100' }).metricsAddress, { host: '::1', port: 9100 });
    refuses({ SERVICE_JWT_SECRET: STRONG, SERVICE_METRICS_ADDRESS: '9090' }, 'SERVICE_METRICS_ADDRESS');
  });
});
