// The authentication gate: an onRequest hook that lets the open routes through and demands a valid,
// not-blacklisted HS256 access token (`Authorization: Bearer <token>`) everywhere else, including on
// URLs that match no route, so an unauthenticated scanner cannot tell which routes exist.
// The blacklist check fails closed: a backend error refuses the request with 503.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TokenClaims, TokenService } from '../../core/auth/tokens.js';
import { BerthError, errors, type ErrorCode } from '../../errors.js';
import type { AuthFailureReason, Metrics } from '../../metrics/metrics.js';
import type { TokenBlacklist } from '../../store/blacklist/blacklist.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Claims of the verified access token; undefined on open routes and when authentication is disabled. */
    auth?: TokenClaims;
  }
}

export interface AuthDeps {
  readonly enabled: boolean;
  readonly tokens: TokenService;
  readonly blacklist: TokenBlacklist | undefined;
  readonly metrics: Metrics;
}

/** `METHOD route-pattern` pairs that need no access token. HEAD follows GET (Fastify adds HEAD routes). */
export const OPEN_ROUTES: ReadonlySet<string> = new Set([
  'GET /health',
  'GET /metrics',
  'POST /auth/token',
  'POST /auth/refresh',
  'GET /swagger/doc.json',
]);

export function isOpenRoute(method: string, routeUrl: string | undefined): boolean {
  if (routeUrl === undefined) return false;
  return OPEN_ROUTES.has(`${method === 'HEAD' ? 'GET' : method} ${routeUrl}`);
}

const FAILURE_REASONS: Partial<Record<ErrorCode, AuthFailureReason>> = {
  BERTH_ERR_AUTH_TOKEN_REQUIRED: 'token_required',
  BERTH_ERR_AUTH_INVALID_TOKEN: 'invalid_token',
  BERTH_ERR_AUTH_TOKEN_EXPIRED: 'token_expired',
  BERTH_ERR_AUTH_TOKEN_BLACKLISTED: 'token_blacklisted',
  BERTH_ERR_AUTH_INVALID_API_TOKEN: 'invalid_api_token',
  BERTH_ERR_AUTH_BLACKLIST_UNAVAILABLE: 'blacklist_unavailable',
};

export function authFailureReason(error: unknown): AuthFailureReason | undefined {
  return error instanceof BerthError ? FAILURE_REASONS[error.code] : undefined;
}

/**
 * The bearer token of an Authorization header. Absent header or an empty bearer → `token required`;
 * another scheme or a malformed value → `invalid token`.
 */
export function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') throw errors.tokenRequired();
  const match = /^Bearer(?: +(\S*))? *$/i.exec(header);
  if (!match) throw errors.invalidToken();
  if (!match[1]) throw errors.tokenRequired();
  return match[1];
}

/** Verifies the request's access token and checks the blacklist; throws the catalogue's 401/503 errors. */
export async function authenticate(
  request: FastifyRequest,
  deps: Pick<AuthDeps, 'tokens' | 'blacklist'>,
): Promise<TokenClaims> {
  const claims = await deps.tokens.verifyAccess(bearerToken(request.headers.authorization));
  if (deps.blacklist === undefined) return claims;
  let blacklisted: boolean;
  try {
    blacklisted = await deps.blacklist.has(claims.jti);
  } catch (error) {
    request.log.error({ err: error }, 'token blacklist lookup failed; refusing the request');
    throw errors.blacklistUnavailable('the blacklist backend failed; the request was refused, retry later');
  }
  if (blacklisted) throw errors.tokenBlacklisted();
  return claims;
}

export function registerAuth(app: FastifyInstance, deps: AuthDeps): void {
  if (!deps.enabled) return;
  app.decorateRequest('auth', undefined);
  app.addHook('onRequest', async (request) => {
    if (isOpenRoute(request.method, request.routeOptions.url)) return;
    try {
      request.auth = await authenticate(request, deps);
    } catch (error) {
      const reason = authFailureReason(error);
      if (reason) deps.metrics.authFailures.labels(reason).inc();
      throw error;
    }
  });
}
