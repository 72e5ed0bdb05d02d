import { AuthService } from '../../src/core/auth/auth-service.js';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { TokenService, type TokenClaims } from '../../src/core/auth/tokens.js';
import { parseApiTokens } from '../../src/api-tokens.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { bearerToken, isOpenRoute, registerAuth } from '../../src/http/plugins/auth.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import type { TokenBlacklist } from '../../src/store/blacklist/blacklist.js';
import { MemoryBlacklist } from '../../src/store/blacklist/memory-blacklist.js';

const SECRET = 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%';
// The API tokens whose identities the tokens below carry as sub.
const CONFIGURED = parseApiTokens(['client-a:k3Vq9ZpX2mLw7RtY-a', 'c:k3Vq9ZpX2mLw7RtY-c']);
/** The subject of tokens issued with the configured API token named `sub` (a wrong fingerprint for others). */
const subject = (sub: string) => ({ sub, client_id: 'test-client', atf: CONFIGURED.find((t) => t.identity === sub)?.fingerprint ?? '000000000000' });

interface Harness {
  app: FastifyInstance;
  tokens: TokenService;
  metrics: Metrics;
  seen: (TokenClaims | undefined)[];
}

async function harness(options: { enabled?: boolean; blacklist?: TokenBlacklist; now?: () => number } = {}): Promise<Harness> {
  const tokens = new TokenService({ secret: SECRET, accessTtlMs: 3_600_000, refreshTtlMs: 7_200_000, now: options.now });
  const metrics = createMetrics();
  const app = Fastify();
  registerErrorHandler(app);
  registerAuth(app, { enabled: options.enabled ?? true, auth: new AuthService({ tokens, blacklist: options.blacklist, apiTokens: CONFIGURED, log: { error: () => undefined } }), metrics });
  const seen: (TokenClaims | undefined)[] = [];
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/swagger/doc.json', async () => ({ openapi: '3.0.0' }));
  app.post('/auth/token', async () => ({ issued: true }));
  app.post('/auth/refresh', async () => ({ refreshed: true }));
  app.get('/jobs/:id', async (request) => {
    seen.push(request.auth);
    return { ok: true };
  });
  await app.ready();
  return { app, tokens, metrics, seen };
}

async function failures(metrics: Metrics, reason: string): Promise<number> {
  return (await metrics.authFailures.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('open routes', () => {
  it('serves GET /health, GET /swagger/doc.json, POST /auth/token and POST /auth/refresh without a token', async () => {
    const { app } = await harness();
    for (const [method, url] of [['GET', '/health'], ['GET', '/swagger/doc.json'], ['POST', '/auth/token'], ['POST', '/auth/refresh']] as const) {
      assert.equal((await app.inject({ method, url })).statusCode, 200, `${method} ${url}`);
    }
  });

  it('serves HEAD /health without a token', async () => {
    const { app } = await harness();
    assert.equal((await app.inject({ method: 'HEAD', url: '/health' })).statusCode, 200);
  });

  it('matches on the route pattern, so a query string does not change the decision', async () => {
    const { app } = await harness();
    assert.equal((await app.inject({ method: 'GET', url: '/health?x=1' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'GET', url: '/jobs/1?health' })).statusCode, 401);
  });

  it('is decided by method and pattern together', () => {
    assert.equal(isOpenRoute('GET', '/health'), true);
    assert.equal(isOpenRoute('POST', '/health'), false);
    assert.equal(isOpenRoute('GET', '/auth/token'), false);
    assert.equal(isOpenRoute('POST', '/auth/validate'), false);
    assert.equal(isOpenRoute('POST', '/auth/logout'), false);
    assert.equal(isOpenRoute('GET', undefined), false);
  });
});

describe('protected routes', () => {
  it('answers 401 token required without an Authorization header', async () => {
    const { app } = await harness();
    const response = await app.inject({ method: 'GET', url: '/jobs/1' });
    assert.equal(response.statusCode, 401);
    assert.deepEqual(response.json(), { error: 'token required', status: 'error' });
  });

  it('answers 401 token required for an empty bearer', async () => {
    const { app } = await harness();
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: { authorization: 'Bearer ' } });
    assert.equal(response.json().error, 'token required');
  });

  it('answers 401 invalid token for another scheme', async () => {
    const { app } = await harness();
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'invalid token');
  });

  it('answers 401 invalid token for a garbage bearer', async () => {
    const { app } = await harness();
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer('not-a-jwt') });
    assert.equal(response.json().error, 'invalid token');
  });

  it('lets a valid access token through and exposes its claims as request.auth', async () => {
    const { app, tokens, seen } = await harness();
    const pair = await tokens.issuePair(subject('client-a'));
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 200);
    assert.equal(seen[0]?.sub, 'client-a');
    assert.equal(seen[0]?.typ, 'access');
  });

  it('refuses a correctly signed token whose API token is not configured (removed, or never there)', async () => {
    const { app, tokens, seen } = await harness();
    const pair = await tokens.issuePair(subject('removed-caller'));
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'invalid token');
    assert.equal(seen.length, 0);
  });

  it('refuses a token obtained with an earlier value of a configured name (the API token was replaced)', async () => {
    const { app, tokens } = await harness();
    const pair = await tokens.issuePair({ ...subject('c'), atf: parseApiTokens(['c:an-earlier-value-0123'])[0]!.fingerprint });
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.access_token) });
    assert.deepEqual([response.statusCode, response.json().error], [401, 'invalid token']);
  });

  it('accepts the scheme name in any case', async () => {
    const { app, tokens } = await harness();
    const pair = await tokens.issuePair(subject('c'));
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: { authorization: `bearer ${pair.access_token}` } });
    assert.equal(response.statusCode, 200);
  });

  it('refuses a refresh token with invalid token', async () => {
    const { app, tokens } = await harness();
    const pair = await tokens.issuePair(subject('c'));
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.refresh_token) });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'invalid token');
  });

  it('answers token expired for an expired access token', async () => {
    let now = 1_700_000_000_000;
    const { app, tokens } = await harness({ now: () => now });
    const pair = await tokens.issuePair(subject('c'));
    now += 3_600_000;
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'token expired');
  });

  it('answers token blacklisted for a blacklisted access token', async () => {
    const blacklist = new MemoryBlacklist();
    const { app, tokens, seen } = await harness({ blacklist });
    const pair = await tokens.issuePair(subject('c'));
    await blacklist.add((await tokens.verifyAccess(pair.access_token)).jti, Date.now() + 3_600_000);
    const response = await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'token blacklisted');
    assert.equal(seen.length, 0);
  });

  it('requires a token for URLs that match no route, so scanners learn nothing', async () => {
    const { app } = await harness();
    const response = await app.inject({ method: 'GET', url: '/admin/secret' });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'token required');
  });

  it('answers 404 for an unknown URL once authenticated', async () => {
    const { app, tokens } = await harness();
    const pair = await tokens.issuePair(subject('c'));
    assert.equal((await app.inject({ method: 'GET', url: '/admin/secret', headers: bearer(pair.access_token) })).statusCode, 404);
  });

  it('does not serve metrics on the API port: GET /metrics without a token is 401, with one 404', async () => {
    const { app, tokens } = await harness();
    assert.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 401);
    const pair = await tokens.issuePair(subject('c'));
    assert.equal((await app.inject({ method: 'GET', url: '/metrics', headers: bearer(pair.access_token) })).statusCode, 404);
  });

  it('requires a token for an open path used with another method', async () => {
    const { app } = await harness();
    assert.equal((await app.inject({ method: 'POST', url: '/health' })).statusCode, 401);
  });
});

describe('auth failure metrics', () => {
  it('counts refusals by reason', async () => {
    const { app, metrics, tokens } = await harness();
    await app.inject({ method: 'GET', url: '/jobs/1' });
    await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer('garbage') });
    await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer('garbage') });
    await app.inject({ method: 'GET', url: '/jobs/1', headers: bearer((await tokens.issuePair(subject('c'))).access_token) });
    assert.equal(await failures(metrics, 'token_required'), 1);
    assert.equal(await failures(metrics, 'invalid_token'), 2);
    assert.equal(await failures(metrics, 'token_expired'), 0);
  });
});

describe('authentication disabled', () => {
  it('adds no check at all', async () => {
    const { app, seen } = await harness({ enabled: false });
    const response = await app.inject({ method: 'GET', url: '/jobs/1' });
    assert.equal(response.statusCode, 200);
    assert.equal(seen[0], undefined);
  });

  it('leaves unknown URLs to the 404 handler', async () => {
    const { app } = await harness({ enabled: false });
    assert.equal((await app.inject({ method: 'GET', url: '/nope' })).statusCode, 404);
  });
});

describe('bearerToken', () => {
  it('extracts the token after "Bearer "', () => {
    assert.equal(bearerToken('Bearer abc.def.ghi'), 'abc.def.ghi');
  });

  it('refuses a header with two tokens', () => {
    assert.throws(() => bearerToken('Bearer a b'), { message: 'invalid token' });
  });

  it('treats a missing header as token required', () => {
    assert.throws(() => bearerToken(undefined), { message: 'token required' });
  });
});
