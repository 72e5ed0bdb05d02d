// Who a caller is: the one place that issues, verifies, rotates and revokes Berth's tokens. It owns the
// token service and the blacklist; HTTP routes and the request gate only decode, call and answer.
// Refresh tokens are single-use: a refresh blacklists the presented refresh token's jti (when a blacklist
// exists), so a stolen refresh token that has been used once is worthless. The blacklist fails closed: a
// backend error refuses the request (503) rather than letting a revoked token through.
// Identity comes from the API token, never from the request: POST /auth/token issues tokens whose `sub` is
// the identity of the API token presented (its name, or a bare token's fingerprint; api-tokens.ts), and
// access and refresh tokens are honoured only while that API token is still configured with the same value,
// so removing an API token from SERVICE_API_TOKENS, or replacing its value (and restarting), ends every
// session it opened.
import type { Logger } from 'pino';
import { errors, BerthError } from '../../errors.js';
import type { TokenBlacklist } from '../../store/blacklist/blacklist.js';
import type { ApiToken } from '../../api-tokens.js';
import { findApiToken, subjectOf, type TokenClaims, type TokenPair, type TokenService } from './tokens.js';

export interface AuthServiceDependencies {
  readonly tokens: TokenService;
  readonly blacklist: TokenBlacklist | undefined;
  readonly apiTokens: readonly ApiToken[];
  readonly log: Pick<Logger, 'error'>;
}

// C0 controls, DEL and C1 controls.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

export class AuthService {
  /** The fingerprint of each configured API token by identity: a token not matching one is refused. */
  private readonly fingerprints: ReadonlyMap<string, string>;

  constructor(private readonly deps: AuthServiceDependencies) {
    this.fingerprints = new Map(deps.apiTokens.map((apiToken) => [apiToken.identity, apiToken.fingerprint]));
  }

  /** The API token presented to POST /auth/token; refused (401) before anything else is looked at. */
  checkApiToken(presented: string): void {
    this.identify(presented);
  }

  /**
   * A token pair for the caller holding `presentedApiToken`. Its `sub`, the owner of everything created with
   * these tokens, is that API token's identity; `clientId` is only carried along as a label, so no value of
   * it (another caller's name or client_id, a fingerprint, slashes…) reaches anyone else's work.
   */
  async issue(presentedApiToken: string, clientId: string): Promise<TokenPair> {
    const apiToken = this.identify(presentedApiToken);
    if (CONTROL_CHARACTERS.test(clientId)) throw errors.badRequest('client_id must not contain control characters');
    return this.deps.tokens.issuePair({ sub: apiToken.identity, client_id: clientId, atf: apiToken.fingerprint });
  }

  /** The configured API token presented; 401 for any other. */
  private identify(presented: string): ApiToken {
    const apiToken = findApiToken(presented, this.deps.apiTokens);
    if (apiToken === undefined) throw errors.invalidApiToken();
    return apiToken;
  }

  /** Refuses a token whose API token is no longer configured (or has another value now), as if never valid. */
  private requireConfiguredIdentity(claims: TokenClaims): void {
    if (this.fingerprints.get(claims.sub) !== claims.atf) throw errors.invalidToken();
  }

  /** The claims of a valid, not revoked access token; the catalogue's 401/503 otherwise. */
  async authenticate(accessToken: string): Promise<TokenClaims> {
    const claims = await this.deps.tokens.verifyAccess(accessToken);
    this.requireConfiguredIdentity(claims);
    const { blacklist } = this.deps;
    if (blacklist === undefined) return claims;
    let revoked: boolean;
    try {
      revoked = await blacklist.has(claims.jti);
    } catch (error) {
      this.deps.log.error({ err: error }, 'token blacklist lookup failed; refusing the request');
      throw errors.blacklistUnavailable('the blacklist backend failed; the request was refused, retry later');
    }
    if (revoked) throw errors.tokenBlacklisted();
    return claims;
  }

  /** Rotates a refresh token: the presented one is revoked, a new pair for the same subject issued. */
  async refresh(refreshToken: string): Promise<TokenPair> {
    const claims = await this.deps.tokens.verifyRefresh(refreshToken);
    this.requireConfiguredIdentity(claims);
    await this.revoke(claims, { mustExist: false, checkFirst: true });
    return this.deps.tokens.issuePair(subjectOf(claims));
  }

  /** Revokes the access token and, when given, a refresh token of the same subject (one already expired is skipped). */
  async logout(access: TokenClaims, refreshToken: string | undefined): Promise<void> {
    const refreshClaims = await this.refreshTokenToRevoke(refreshToken, access.sub);
    await this.revoke(access, { mustExist: true, checkFirst: false });
    if (refreshClaims) await this.revoke(refreshClaims, { mustExist: true, checkFirst: false });
  }

  private async refreshTokenToRevoke(token: string | undefined, sub: string): Promise<TokenClaims | undefined> {
    if (token === undefined) return undefined;
    try {
      const claims = await this.deps.tokens.verifyRefresh(token);
      if (claims.sub !== sub) throw errors.invalidToken();
      return claims;
    } catch (error) {
      if (error instanceof BerthError && error.code === 'BERTH_ERR_AUTH_TOKEN_EXPIRED') return undefined;
      throw error;
    }
  }

  /**
   * Blacklists a token's jti until its expiry. With `checkFirst`, an already blacklisted token is refused
   * (`token blacklisted`). Backend errors are 503, never ignored; a missing blacklist is 503 when `mustExist`.
   */
  private async revoke(claims: TokenClaims, options: { mustExist: boolean; checkFirst: boolean }): Promise<void> {
    const { blacklist } = this.deps;
    if (blacklist === undefined) {
      if (options.mustExist) throw errors.blacklistUnavailable('no token blacklist is configured');
      return;
    }
    try {
      if (options.checkFirst && (await blacklist.has(claims.jti))) throw errors.tokenBlacklisted();
      await blacklist.add(claims.jti, claims.exp * 1000);
    } catch (error) {
      if (error instanceof BerthError && error.code === 'BERTH_ERR_AUTH_TOKEN_BLACKLISTED') throw error;
      this.deps.log.error({ err: error }, 'token blacklist failed');
      throw errors.blacklistUnavailable('the blacklist backend failed; the token was not revoked, retry later');
    }
  }
}
