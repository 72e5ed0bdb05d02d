// Issues and verifies Berth's JWTs. Access and refresh tokens are HS256 JWTs signed with
// SERVICE_JWT_SECRET, carrying sub (the identity of the API token that obtained them), client_id (the
// name the caller asked for: a label, never an owner), atf (that API token's fingerprint), iat, exp, jti
// and a `typ` claim ('access' | 'refresh') so neither kind is ever accepted as the other. A token without
// client_id and atf comes from a release whose `sub` was the requested client_id, so anyone could have
// named any owner in it: it is refused. Only HS256 is accepted: the header's alg is checked before any
// verification and jose is told the same, so alg none, other HMAC sizes, RS256 and the RS256-with-HMAC-key
// confusion all end as `invalid token`. Every jose error is translated here, at one place.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { SignJWT, decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { BerthError, errors } from '../../errors.js';
import type { ApiToken } from '../../api-tokens.js';

export type TokenKind = 'access' | 'refresh';

/** Whom a token pair is for; kept unchanged through refreshes. */
export interface TokenSubject {
  /** The identity of the API token the token descends from (api-tokens.ts): the owner of its work. */
  readonly sub: string;
  /** The client_id asked for at POST /auth/token; kept through refreshes, shown, never used to decide access. */
  readonly client_id: string;
  /** The fingerprint of that API token's value (api-tokens.ts). */
  readonly atf: string;
}

export interface TokenClaims extends TokenSubject {
  /** Seconds since the epoch. */
  readonly exp: number;
  /** Seconds since the epoch. */
  readonly iat: number;
  readonly jti: string;
  readonly typ: TokenKind;
}

export interface TokenPair {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  /** Lifetime of access_token in seconds. */
  expires_in: number;
}

export interface TokenServiceOptions {
  readonly secret: string;
  readonly accessTtlMs: number;
  readonly refreshTtlMs: number;
  /** Epoch milliseconds; injectable for tests. */
  readonly now?: () => number;
}

const ALGORITHM = 'HS256';
// Tokens Berth issues are ~300 bytes; anything far larger is not ours and is refused before parsing.
const MAX_TOKEN_LENGTH = 4096;

export class TokenService {
  private readonly key: Uint8Array;
  private readonly accessTtlSeconds: number;
  private readonly refreshTtlSeconds: number;
  private readonly now: () => number;

  constructor(options: TokenServiceOptions) {
    if (options.secret === '') throw new Error('TokenService: the signing secret is empty');
    this.key = new TextEncoder().encode(options.secret);
    this.accessTtlSeconds = toSeconds(options.accessTtlMs);
    this.refreshTtlSeconds = toSeconds(options.refreshTtlMs);
    this.now = options.now ?? Date.now;
  }

  async issuePair(subject: TokenSubject): Promise<TokenPair> {
    const [accessToken, refreshToken] = await Promise.all([
      this.sign(subject, 'access', this.accessTtlSeconds),
      this.sign(subject, 'refresh', this.refreshTtlSeconds),
    ]);
    return { access_token: accessToken, refresh_token: refreshToken, token_type: 'Bearer', expires_in: this.accessTtlSeconds };
  }

  /**
   * Verifies a refresh token and issues a new pair for its subject (the refresh token rotates).
   * Revoking the presented refresh token is the caller's job: it owns the blacklist.
   */
  async refresh(refreshToken: string): Promise<TokenPair> {
    const claims = await this.verifyRefresh(refreshToken);
    return this.issuePair(subjectOf(claims));
  }

  verifyAccess(token: string): Promise<TokenClaims> {
    return this.verify(token, 'access');
  }

  verifyRefresh(token: string): Promise<TokenClaims> {
    return this.verify(token, 'refresh');
  }

  private async sign(subject: TokenSubject, typ: TokenKind, ttlSeconds: number): Promise<string> {
    const iat = Math.floor(this.now() / 1000);
    return new SignJWT({ typ, client_id: subject.client_id, atf: subject.atf })
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setSubject(subject.sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ttlSeconds)
      .setJti(randomUUID())
      .sign(this.key);
  }

  private async verify(token: string, expected: TokenKind): Promise<TokenClaims> {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) throw errors.invalidToken();
    try {
      if (decodeProtectedHeader(token).alg !== ALGORITHM) throw errors.invalidToken();
      const { payload } = await jwtVerify(token, this.key, {
        algorithms: [ALGORITHM],
        requiredClaims: ['sub', 'exp', 'iat', 'jti'],
        currentDate: new Date(this.now()),
      });
      const { sub, exp, iat, jti, typ, client_id: clientId, atf } = payload;
      if (typ !== expected || typeof sub !== 'string' || sub === '' || typeof jti !== 'string' || jti === '' || typeof clientId !== 'string' || typeof atf !== 'string') {
        throw errors.invalidToken();
      }
      return { sub, client_id: clientId, atf, exp: exp!, iat: iat!, jti, typ: expected };
    } catch (error) {
      if (error instanceof BerthError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw errors.tokenExpired();
      throw errors.invalidToken();
    }
  }
}

/** The subject of a verified token, for the pair that replaces it. */
export function subjectOf(claims: TokenSubject): TokenSubject {
  return { sub: claims.sub, client_id: claims.client_id, atf: claims.atf };
}

/**
 * The entry of `accepted` whose token equals `presented`, in time independent of where (or whether) they
 * differ: both sides are hashed to SHA-256 first so lengths do not leak, and every candidate is compared.
 */
export function findApiToken(presented: string, accepted: readonly ApiToken[]): ApiToken | undefined {
  const digest = sha256(presented);
  let found: ApiToken | undefined;
  for (const candidate of accepted) {
    if (candidate.token === '') continue;
    if (timingSafeEqual(digest, sha256(candidate.token))) found ??= candidate;
  }
  return found;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function toSeconds(ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) throw new Error(`TokenService: token lifetime ${ms} ms is not positive`);
  return Math.max(1, Math.round(ms / 1000));
}
