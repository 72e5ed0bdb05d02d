import { AuthService } from '../../src/core/auth/auth-service.js';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Config } from '../../src/config.js';
import { TokenService } from '../../src/core/auth/tokens.js';
import { bareTokenIdentity, parseApiTokens } from '../../src/api-tokens.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { ErrorBodySchema } from '../../src/http/schemas.js';
import { createValidatorCompiler } from '../../src/http/validators.js';
import { registerAuth } from '../../src/http/plugins/auth.js';
import { registerAuthRoutes } from '../../src/http/routes/auth.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import type { TokenBlacklist } from '../../src/store/blacklist/blacklist.js';
import { createBlacklist } from '../../src/store/blacklist/create-blacklist.js';
import { MemoryBlacklist } from '../../src/store/blacklist/memory-blacklist.js';

const SECRET = 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%';
const API_TOKEN = 'api-token-0123456789abcdef';
const OTHER_TOKEN = 'other-token-0123456789abcdef';
const BARE_TOKEN = 'bare-token-0123456789abcdef';
// API_TOKEN is alice's; the bare one is an unnamed owner of its own.
const API_TOKENS = parseApiTokens([`other:${OTHER_TOKEN}`, `alice:${API_TOKEN}`, BARE_TOKEN]);

function authConfig(overrides: Partial<Config['auth']> = {}): Config['auth'] {
  return {
    enabled: true,
    jwtSecret: SECRET,
    apiTokens: API_TOKENS,
    accessTtlMs: 24 * 3_600_000,
    refreshTtlMs: 7 * 24 * 3_600_000,
    blacklistBackend: 'memory',
    blacklistBoltPath: '/nonexistent/blacklist.db',
    blacklistCleanupIntervalMs: 3_600_000,
    ...overrides,
  };
}

interface Service {
  app: FastifyInstance;
  metrics: Metrics;
}

// Built the way src/http/app.ts wires it: strict body validator, error handler, auth gate, then the routes.
async function service(options: { blacklist?: TokenBlacklist | null; enabled?: boolean; apiTokens?: Config['auth']['apiTokens'] } = {}): Promise<Service> {
  const config = authConfig({ enabled: options.enabled ?? true, ...(options.apiTokens ? { apiTokens: options.apiTokens } : {}) });
  const tokens = new TokenService({ secret: config.jwtSecret, accessTtlMs: config.accessTtlMs, refreshTtlMs: config.refreshTtlMs });
  const blacklist = options.blacklist === null ? undefined : (options.blacklist ?? new MemoryBlacklist());
  const metrics = createMetrics();
  const app = Fastify();
  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  app.addSchema(ErrorBodySchema);
  const auth = new AuthService({ tokens, blacklist, apiTokens: config.apiTokens, log: { error: () => undefined } });
  registerAuth(app, { enabled: config.enabled, auth, metrics });
  registerAuthRoutes(app, { auth, metrics });
  app.get('/jobs', async () => ({ jobs: [] }));
  await app.ready();
  return { app, metrics };
}

interface Pair {
  access_token: string;
  refresh_token: string;
  token_type: string;
  expires_in: number;
}

async function login(app: FastifyInstance, clientId = 'client-a', apiToken = API_TOKEN): Promise<Pair> {
  const response = await app.inject({
    method: 'POST',
    url: '/auth/token',
    headers: { authorization: `Bearer ${apiToken}` },
    payload: { client_id: clientId },
  });
  assert.equal(response.statusCode, 200, response.body);
  return response.json<Pair>();
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('POST /auth/token', () => {
  it('exchanges a valid API token for an access token and a refresh token', async () => {
    const { app } = await service();
    const pair = await login(app);
    assert.equal(pair.token_type, 'Bearer');
    assert.equal(pair.expires_in, 86_400);
    assert.equal(typeof pair.access_token, 'string');
    assert.equal(typeof pair.refresh_token, 'string');
    assert.equal((await app.inject({ method: 'GET', url: '/jobs', headers: bearer(pair.access_token) })).statusCode, 200);
  });

  it('answers 401 token required without an Authorization header', async () => {
    const { app } = await service();
    const response = await app.inject({ method: 'POST', url: '/auth/token', payload: { client_id: 'c' } });
    assert.equal(response.statusCode, 401);
    assert.deepEqual(response.json(), { error: 'token required', status: 'error' });
  });

  it('answers 401 invalid token for an API token that is not configured', async () => {
    const { app, metrics } = await service();
    const response = await app.inject({ method: 'POST', url: '/auth/token', headers: bearer('wrong'), payload: { client_id: 'c' } });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'invalid token');
    const counted = (await metrics.authFailures.get()).values.find((v) => v.labels.reason === 'invalid_api_token');
    assert.equal(counted?.value, 1);
  });

  it('does not accept an access token in place of the API token', async () => {
    const { app } = await service();
    const pair = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/token', headers: bearer(pair.access_token), payload: { client_id: 'c' } });
    assert.equal(response.statusCode, 401);
  });

  it('checks the API token before the body, so an unauthenticated caller learns nothing about it', async () => {
    const { app } = await service();
    const response = await app.inject({ method: 'POST', url: '/auth/token', headers: bearer('wrong'), payload: { nonsense: 1 } });
    assert.equal(response.statusCode, 401);
  });

  it('refuses a missing, empty, too long or unknown-field body with 400', async () => {
    const { app } = await service();
    for (const payload of [{}, { client_id: '' }, { client_id: 'x'.repeat(257) }, { client_id: 'c', extra: 1 }, { client_id: 7 }]) {
      const response = await app.inject({ method: 'POST', url: '/auth/token', headers: bearer(API_TOKEN), payload });
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
      assert.equal(response.json().status, 'error');
    }
  });

  it('accepts a client_id of exactly 256 characters', async () => {
    const { app } = await service();
    await login(app, 'x'.repeat(256));
  });

  it('refuses control characters in client_id', async () => {
    const { app } = await service();
    for (const clientId of ['a\nb', 'a\u0000', '\u001b[31mred', 'a\u007f', 'a\u0085']) {
      const response = await app.inject({ method: 'POST', url: '/auth/token', headers: bearer(API_TOKEN), payload: { client_id: clientId } });
      assert.equal(response.statusCode, 400, JSON.stringify(clientId));
      assert.equal(response.json().error, 'client_id must not contain control characters');
    }
  });
});

describe('POST /auth/refresh', () => {
  it('returns a new access token and a rotated refresh token without an Authorization header', async () => {
    const { app } = await service();
    const first = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: first.refresh_token } });
    assert.equal(response.statusCode, 200, response.body);
    const second = response.json<Pair>();
    assert.deepEqual(Object.keys(second).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type']);
    assert.notEqual(second.refresh_token, first.refresh_token);
    assert.equal((await app.inject({ method: 'GET', url: '/jobs', headers: bearer(second.access_token) })).statusCode, 200);
  });

  it('accepts a refresh token once: reuse answers token blacklisted', async () => {
    const { app } = await service();
    const first = await login(app);
    await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: first.refresh_token } });
    const reuse = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: first.refresh_token } });
    assert.equal(reuse.statusCode, 401);
    assert.equal(reuse.json().error, 'token blacklisted');
  });

  it('refuses an access token with invalid token', async () => {
    const { app } = await service();
    const pair = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: pair.access_token } });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'invalid token');
  });

  it('refuses a missing refresh_token with 400', async () => {
    const { app } = await service();
    assert.equal((await app.inject({ method: 'POST', url: '/auth/refresh', payload: {} })).statusCode, 400);
  });

  it('answers 503 and issues nothing when the blacklist cannot record the used refresh token', async () => {
    const broken = new MemoryBlacklist();
    broken.add = async () => {
      throw new Error('disk full');
    };
    const { app } = await service({ blacklist: broken });
    const pair = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: pair.refresh_token } });
    assert.equal(response.statusCode, 503);
    assert.equal(response.json().error, 'token blacklist unavailable: the blacklist backend failed; the token was not revoked, retry later');
  });
});

describe('POST /auth/validate', () => {
  it('returns valid and the sub and exp claims', async () => {
    const { app } = await service();
    const pair = await login(app, 'client-v');
    const response = await app.inject({ method: 'POST', url: '/auth/validate', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 200);
    const body = response.json<{ valid: boolean; claims: { sub: string; exp: number } }>();
    assert.equal(body.valid, true);
    assert.equal(body.claims.sub, 'alice', 'the sub is the API token\'s name, not the client_id');
    assert.ok(Math.abs(body.claims.exp - (Math.floor(Date.now() / 1000) + 86_400)) <= 2);
    assert.deepEqual(Object.keys(body.claims).sort(), ['exp', 'sub']);
  });

  it('answers 401 token required without a token', async () => {
    const { app } = await service();
    const response = await app.inject({ method: 'POST', url: '/auth/validate' });
    assert.equal(response.statusCode, 401);
    assert.equal(response.json().error, 'token required');
  });

  it('verifies the token itself when the auth gate is not installed', async () => {
    const { app } = await service({ enabled: false });
    assert.equal((await app.inject({ method: 'POST', url: '/auth/validate', headers: bearer('garbage') })).statusCode, 401);
    const pair = await login(app);
    assert.equal((await app.inject({ method: 'POST', url: '/auth/validate', headers: bearer(pair.access_token) })).statusCode, 200);
  });
});

describe('POST /auth/logout', () => {
  it('answers success and later use of the token gives 401 token blacklisted', async () => {
    const { app } = await service();
    const pair = await login(app);
    const logout = await app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(pair.access_token) });
    assert.equal(logout.statusCode, 200);
    assert.deepEqual(logout.json(), { success: true });
    const reuse = await app.inject({ method: 'GET', url: '/jobs', headers: bearer(pair.access_token) });
    assert.equal(reuse.statusCode, 401);
    assert.deepEqual(reuse.json(), { error: 'token blacklisted', status: 'error' });
  });

  it('leaves other tokens of the same client usable', async () => {
    const { app } = await service();
    const first = await login(app);
    const second = await login(app);
    await app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(first.access_token) });
    assert.equal((await app.inject({ method: 'GET', url: '/jobs', headers: bearer(second.access_token) })).statusCode, 200);
  });

  it('also blacklists the refresh token given in the body', async () => {
    const { app } = await service();
    const pair = await login(app);
    const logout = await app.inject({
      method: 'POST',
      url: '/auth/logout',
      headers: bearer(pair.access_token),
      payload: { refresh_token: pair.refresh_token },
    });
    assert.equal(logout.statusCode, 200);
    const refresh = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: pair.refresh_token } });
    assert.equal(refresh.json().error, 'token blacklisted');
  });

  it('refuses to revoke a refresh token of another client', async () => {
    const { app } = await service();
    const mine = await login(app, 'mine');
    const theirs = await login(app, 'theirs', OTHER_TOKEN);
    const logout = await app.inject({
      method: 'POST',
      url: '/auth/logout',
      headers: bearer(mine.access_token),
      payload: { refresh_token: theirs.refresh_token },
    });
    assert.equal(logout.statusCode, 401);
    assert.equal((await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: theirs.refresh_token } })).statusCode, 200);
  });

  it('answers 503 when no blacklist is configured', async () => {
    const { app } = await service({ blacklist: null });
    const pair = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 503);
    assert.deepEqual(response.json(), { error: 'token blacklist unavailable: no token blacklist is configured', status: 'error' });
  });

  it('answers 503 when adding to the blacklist fails', async () => {
    const broken = new MemoryBlacklist();
    broken.add = async () => {
      throw new Error('disk full');
    };
    const { app } = await service({ blacklist: broken });
    const pair = await login(app);
    const response = await app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(pair.access_token) });
    assert.equal(response.statusCode, 503);
  });

  it('answers 401 token required without a token', async () => {
    const { app } = await service();
    assert.equal((await app.inject({ method: 'POST', url: '/auth/logout' })).json().error, 'token required');
  });
});

describe('identity from the API token', () => {
  const subOf = async (app: FastifyInstance, pair: Pair) =>
    (await app.inject({ method: 'POST', url: '/auth/validate', headers: bearer(pair.access_token) })).json<{ claims: { sub: string } }>().claims.sub;
  const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { sub: string; client_id: string };

  it('gives every token of a named API token sub = its name, whatever client_id is asked for', async () => {
    const { app } = await service();
    for (const clientId of ['client-a', 'other', 'Other', 'other/client-a', '../other', 'alice/../other', bareTokenIdentity(BARE_TOKEN), ' other ', 'x'.repeat(256)]) {
      const pair = await login(app, clientId);
      assert.equal(await subOf(app, pair), 'alice', JSON.stringify(clientId));
      assert.deepEqual(claimsOf(pair.access_token), { ...claimsOf(pair.access_token), sub: 'alice', client_id: clientId }, 'the client_id is kept as a label');
    }
    assert.equal(await subOf(app, await login(app, 'alice', OTHER_TOKEN)), 'other', 'asking for another name\'s client_id gives one\'s own name');
  });

  it('gives a bare API token its own identity: token:<fingerprint>, the same after a restart, never the token', async () => {
    const first = await service();
    const pair = await login(first.app, 'console', BARE_TOKEN);
    const sub = await subOf(first.app, pair);
    assert.match(sub, /^token:[0-9a-f]{12}$/);
    assert.ok(!sub.includes(BARE_TOKEN.slice(0, 8)));
    const second = await service();
    assert.equal(await subOf(second.app, await login(second.app, 'cli', BARE_TOKEN)), sub, 'stable across restarts and client_ids');
    assert.equal(await subOf(second.app, pair), sub, 'tokens issued before a restart keep their owner');
  });

  it('keeps sub and client_id through a refresh', async () => {
    const { app } = await service();
    const pair = await login(app, 'ci-bot');
    const refreshed = await app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: pair.refresh_token } });
    assert.equal(refreshed.statusCode, 200);
    const claims = claimsOf(refreshed.json<Pair>().access_token);
    assert.deepEqual([claims.sub, claims.client_id], ['alice', 'ci-bot']);
  });

  it('refuses access and refresh tokens of an API token that is no longer configured', async () => {
    const before = await service();
    const pair = await login(before.app, 'ci-bot');
    const after = await service({ apiTokens: parseApiTokens([`other:${OTHER_TOKEN}`]) });
    const use = await after.app.inject({ method: 'GET', url: '/jobs', headers: bearer(pair.access_token) });
    assert.deepEqual([use.statusCode, use.json().error], [401, 'invalid token']);
    const refresh = await after.app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: pair.refresh_token } });
    assert.deepEqual([refresh.statusCode, refresh.json().error], [401, 'invalid token']);
    const renamed = await service({ apiTokens: parseApiTokens([`carol:${API_TOKEN}`]) });
    assert.equal((await renamed.app.inject({ method: 'GET', url: '/jobs', headers: bearer(pair.access_token) })).statusCode, 401, 'renaming a token ends its sessions too');
  });

  it('ends the sessions of a replaced token value, and keeps the owner for the new value', async () => {
    const before = await service();
    const old = await login(before.app, 'ci-bot');
    const NEW_TOKEN = 'replaced-token-0123456789abcdef';
    const after = await service({ apiTokens: parseApiTokens([`alice:${NEW_TOKEN}`]) });
    assert.equal((await after.app.inject({ method: 'GET', url: '/jobs', headers: bearer(old.access_token) })).statusCode, 401);
    assert.equal((await after.app.inject({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: old.refresh_token } })).statusCode, 401);
    assert.equal(await subOf(after.app, await login(after.app, 'ci-bot', NEW_TOKEN)), 'alice');
  });
});

describe('bolt blacklist across a service restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-auth-routes-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('still refuses a logged-out token after the service restarts on the same file', async () => {
    const config = { blacklistBackend: 'bolt', blacklistBoltPath: join(dir, 'nested', 'blacklist.db'), blacklistCleanupIntervalMs: 60_000 } as const;

    const firstBlacklist = createBlacklist(config);
    const first = await service({ blacklist: firstBlacklist });
    const pair = await login(first.app);
    assert.equal((await first.app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(pair.access_token) })).statusCode, 200);
    await first.app.close();
    await firstBlacklist.close();

    const secondBlacklist = createBlacklist(config);
    const second = await service({ blacklist: secondBlacklist });
    const reuse = await second.app.inject({ method: 'GET', url: '/jobs', headers: bearer(pair.access_token) });
    assert.equal(reuse.statusCode, 401);
    assert.equal(reuse.json().error, 'token blacklisted');
    await second.app.close();
    await secondBlacklist.close();
  });
});

describe('OpenAPI metadata', () => {
  it('gives every auth route a body-or-response schema and the auth tag', async () => {
    const app = Fastify();
    app.addSchema(ErrorBodySchema);
    const routes: { url: string; tags: unknown; response: unknown }[] = [];
    app.addHook('onRoute', (route) => {
      routes.push({ url: route.url, tags: route.schema?.tags, response: route.schema?.response });
    });
    const tokens = new TokenService({ secret: SECRET, accessTtlMs: 1000, refreshTtlMs: 1000 });
    registerAuthRoutes(app, { auth: new AuthService({ tokens, blacklist: undefined, apiTokens: authConfig().apiTokens, log: { error: () => undefined } }) });
    await app.ready();
    assert.deepEqual(routes.map((r) => r.url).sort(), ['/auth/logout', '/auth/refresh', '/auth/token', '/auth/validate']);
    for (const route of routes) {
      assert.deepEqual(route.tags, ['auth']);
      assert.ok(route.response, `${route.url} has a response schema`);
    }
  });
});
