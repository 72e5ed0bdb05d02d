import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { SignJWT, generateKeyPair } from 'jose';
import { TokenService, findApiToken } from '../../src/core/auth/tokens.js';
import { parseApiTokens } from '../../src/api-tokens.js';
import { BerthError } from '../../src/errors.js';

const SECRET = 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%';
const KEY = new TextEncoder().encode(SECRET);
const HOUR = 3_600_000;
// The fingerprint of the API token the tokens below descend from.
const ATF = '0123456789ab';

function service(now = () => Date.now()): TokenService {
  return new TokenService({ secret: SECRET, accessTtlMs: 24 * HOUR, refreshTtlMs: 7 * 24 * HOUR, now });
}

function base64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function validPayload(typ = 'access'): Record<string, unknown> {
  const iat = Math.floor(Date.now() / 1000);
  return { sub: 'client', client_id: 'cli', atf: ATF, iat, exp: iat + 3600, jti: 'a-jti', typ };
}

async function rejectsWith(promise: Promise<unknown>, message: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof BerthError, `expected a BerthError, got ${String(error)}`);
    assert.equal(error.message, message);
    assert.equal(error.status, 401);
    return true;
  });
}

describe('TokenService.issuePair', () => {
  it('returns an access token, a refresh token, token_type Bearer and expires_in in seconds', async () => {
    const pair = await service().issuePair({ sub: 'client-a', client_id: 'cli', atf: ATF });
    assert.equal(pair.token_type, 'Bearer');
    assert.equal(pair.expires_in, 86_400);
    assert.match(pair.access_token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.match(pair.refresh_token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.notEqual(pair.access_token, pair.refresh_token);
  });

  it('signs with HS256 and puts sub, client_id, atf, iat, exp, jti and typ in the claims', async () => {
    const now = 1_700_000_000_000;
    const tokens = service(() => now);
    const pair = await tokens.issuePair({ sub: 'client-a', client_id: 'cli', atf: ATF });
    const header = JSON.parse(Buffer.from(pair.access_token.split('.')[0]!, 'base64url').toString()) as { alg: string };
    assert.equal(header.alg, 'HS256');
    const access = await tokens.verifyAccess(pair.access_token);
    assert.deepEqual({ ...access, jti: typeof access.jti }, { sub: 'client-a', client_id: 'cli', atf: ATF, iat: 1_700_000_000, exp: 1_700_086_400, jti: 'string', typ: 'access' });
    const refresh = await tokens.verifyRefresh(pair.refresh_token);
    assert.equal(refresh.exp, 1_700_000_000 + 7 * 86_400);
    assert.equal(refresh.typ, 'refresh');
    assert.notEqual(access.jti, refresh.jti);
  });

  it('gives every token its own jti', async () => {
    const tokens = service();
    const a = await tokens.verifyAccess((await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF })).access_token);
    const b = await tokens.verifyAccess((await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF })).access_token);
    assert.notEqual(a.jti, b.jti);
  });
});

describe('TokenService.refresh', () => {
  it('returns a new access token and a rotated refresh token for the same subject', async () => {
    const tokens = service();
    const first = await tokens.issuePair({ sub: 'client-a', client_id: 'cli', atf: ATF });
    const second = await tokens.refresh(first.refresh_token);
    assert.deepEqual(Object.keys(second).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type']);
    assert.notEqual(second.refresh_token, first.refresh_token);
    assert.notEqual(second.access_token, first.access_token);
    assert.deepEqual(
      (({ sub, client_id, atf }) => ({ sub, client_id, atf }))(await tokens.verifyAccess(second.access_token)),
      { sub: 'client-a', client_id: 'cli', atf: ATF },
      'sub, client_id and atf survive the rotation',
    );
  });

  it('refuses an access token', async () => {
    const tokens = service();
    await rejectsWith(tokens.refresh((await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF })).access_token), 'invalid token');
  });
});

describe('token kinds', () => {
  it('never accepts a refresh token as an access token', async () => {
    const tokens = service();
    await rejectsWith(tokens.verifyAccess((await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF })).refresh_token), 'invalid token');
  });

  it('never accepts an access token as a refresh token', async () => {
    const tokens = service();
    await rejectsWith(tokens.verifyRefresh((await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF })).access_token), 'invalid token');
  });

  it('refuses a correctly signed token without a typ claim', async () => {
    const { typ: _typ, ...payload } = validPayload();
    const token = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses a correctly signed token without a client_id claim (one from before sub came from the API token)', async () => {
    const { client_id: _clientId, ...payload } = validPayload();
    const token = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
    const refresh = await new SignJWT({ ...payload, typ: 'refresh' }).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    await rejectsWith(service().refresh(refresh), 'invalid token');
  });

  it('refuses a correctly signed token without an atf claim', async () => {
    const { atf: _atf, ...payload } = validPayload();
    const token = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses a correctly signed token without a jti claim', async () => {
    const { jti: _jti, ...payload } = validPayload();
    const token = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('accepts a correctly signed HS256 token with all claims', async () => {
    const token = await new SignJWT(validPayload()).setProtectedHeader({ alg: 'HS256' }).sign(KEY);
    assert.equal((await service().verifyAccess(token)).sub, 'client');
  });
});

describe('expiry', () => {
  it('answers token expired once exp has passed', async () => {
    let now = 1_700_000_000_000;
    const tokens = service(() => now);
    const pair = await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF });
    now += 24 * HOUR;
    await rejectsWith(tokens.verifyAccess(pair.access_token), 'token expired');
  });

  it('accepts the token one second before exp', async () => {
    let now = 1_700_000_000_000;
    const tokens = service(() => now);
    const pair = await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF });
    now += 24 * HOUR - 1000;
    assert.equal((await tokens.verifyAccess(pair.access_token)).sub, 'c');
  });

  it('answers token expired for an expired refresh token', async () => {
    let now = 1_700_000_000_000;
    const tokens = service(() => now);
    const pair = await tokens.issuePair({ sub: 'c', client_id: 'cli', atf: ATF });
    now += 8 * 24 * HOUR;
    await rejectsWith(tokens.refresh(pair.refresh_token), 'token expired');
  });

  it('answers invalid token, not token expired, for an expired token with a bad signature', async () => {
    const payload = { ...validPayload(), exp: 1000, iat: 10 };
    const token = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(`${SECRET}-other`));
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });
});

describe('algorithms other than HS256', () => {
  it('refuses HS512 signed with the right secret', async () => {
    const token = await new SignJWT(validPayload()).setProtectedHeader({ alg: 'HS512' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses HS384 signed with the right secret', async () => {
    const token = await new SignJWT(validPayload()).setProtectedHeader({ alg: 'HS384' }).sign(KEY);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses alg none', async () => {
    const token = `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(validPayload())}.`;
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses alg "None" and "NONE"', async () => {
    for (const alg of ['None', 'NONE']) {
      const token = `${base64url({ alg })}.${base64url(validPayload())}.`;
      await rejectsWith(service().verifyAccess(token), 'invalid token');
    }
  });

  it('refuses RS256', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const token = await new SignJWT(validPayload()).setProtectedHeader({ alg: 'RS256' }).sign(privateKey);
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses an RS256 header over an HMAC signature made with the secret (algorithm confusion)', async () => {
    const input = `${base64url({ alg: 'RS256', typ: 'JWT' })}.${base64url(validPayload())}`;
    const signature = createHmac('sha256', SECRET).update(input).digest('base64url');
    await rejectsWith(service().verifyAccess(`${input}.${signature}`), 'invalid token');
  });

  it('refuses a token whose header has no alg', async () => {
    const input = `${base64url({ typ: 'JWT' })}.${base64url(validPayload())}`;
    const signature = createHmac('sha256', SECRET).update(input).digest('base64url');
    await rejectsWith(service().verifyAccess(`${input}.${signature}`), 'invalid token');
  });
});

describe('malformed and forged tokens', () => {
  it('refuses a token signed with another secret', async () => {
    const token = await new SignJWT(validPayload()).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(`${SECRET}x`));
    await rejectsWith(service().verifyAccess(token), 'invalid token');
  });

  it('refuses a token whose payload was changed after signing', async () => {
    const tokens = service();
    const [header, , signature] = (await tokens.issuePair({ sub: 'alice', client_id: 'cli', atf: ATF })).access_token.split('.');
    const forged = `${header}.${base64url({ ...validPayload(), sub: 'admin' })}.${signature}`;
    await rejectsWith(tokens.verifyAccess(forged), 'invalid token');
  });

  it('refuses strings that are not JWTs', async () => {
    for (const token of ['', 'abc', 'a.b.c', '..', `${'a'.repeat(5000)}.b.c`, 'eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.x']) {
      await rejectsWith(service().verifyAccess(token), 'invalid token');
    }
  });
});

describe('findApiToken', () => {
  const accepted = parseApiTokens(['alice:first-token-value', 'second-token-value']);

  it('finds the entry of a token that is in the list, with its identity', () => {
    assert.equal(findApiToken('first-token-value', accepted)?.identity, 'alice');
    assert.equal(findApiToken('second-token-value', accepted)?.identity, accepted[1]!.identity);
  });

  it('refuses a token that is not in the list, and the name:token entry itself', () => {
    assert.equal(findApiToken('third-token-value', accepted), undefined);
    assert.equal(findApiToken('alice:first-token-value', accepted), undefined);
    assert.equal(findApiToken('alice', accepted), undefined);
  });

  it('refuses prefixes, extensions and case variants of an accepted token', () => {
    for (const presented of ['first-token-valu', 'first-token-value!', 'FIRST-TOKEN-VALUE', '']) assert.equal(findApiToken(presented, accepted), undefined);
  });

  it('accepts nothing when no API token is configured', () => {
    assert.equal(findApiToken('', []), undefined);
    assert.equal(findApiToken('anything', []), undefined);
  });
});

describe('TokenService construction', () => {
  it('refuses an empty secret', () => {
    assert.throws(() => new TokenService({ secret: '', accessTtlMs: 1000, refreshTtlMs: 1000 }));
  });

  it('refuses a non-positive lifetime', () => {
    assert.throws(() => new TokenService({ secret: SECRET, accessTtlMs: 0, refreshTtlMs: 1000 }));
  });
});
