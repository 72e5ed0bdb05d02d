// The authentication gate: an onRequest hook that lets the open routes through and demands a valid,
// not-blacklisted HS256 access token (`Authorization: Bearer <token>`) everywhere else, including on
// URLs that match no route, so an unauthenticated scanner cannot tell which routes exist.
// The blacklist check fails closed: a backend error refuses the request with 503.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TokenClaims } from '../../core/auth/tokens.js';
import type { AuthService } from '../../core/auth/auth-service.js';
import { BerthError, errors, type ErrorCode } from '../../errors.js';
import type { AuthFailureReason, Metrics } from '../../metrics/metrics.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Claims of the verified access token; undefined on open routes and when authentication is disabled. */
    auth?: TokenClaims;
  }
}

export interface AuthDeps {
  readonly enabled: boolean;
  readonly auth: AuthService;
  readonly metrics: Metrics;
}

/**
 * `METHOD route-pattern` pairs that need no access token. HEAD follows GET (Fastify adds HEAD routes).
 * The web console's files (/console) hold no data: the API calls the console makes carry the token.
 */
export const OPEN_ROUTES: ReadonlySet<string> = new Set([
  'GET /health',
  'GET /version',
  'GET /metrics',
  'POST /auth/token',
  'POST /auth/refresh',
  'GET /swagger/doc.json',
  'GET /console',
  'GET /console/*',
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

/** The request's access token, verified and checked against the blacklist (core/auth/auth-service.ts). */
export async function authenticate(request: FastifyRequest, auth: AuthService): Promise<TokenClaims> {
  return auth.authenticate(bearerToken(request.headers.authorization));
}

export function registerAuth(app: FastifyInstance, deps: AuthDeps): void {
  if (!deps.enabled) return;
  app.decorateRequest('auth', undefined);
  app.addHook('onRequest', async (request) => {
    if (isOpenRoute(request.method, request.routeOptions.url)) return;
    try {
      request.auth = await authenticate(request, deps.auth);
    } catch (error) {
      const reason = authFailureReason(error);
      if (reason) deps.metrics.authFailures.labels(reason).inc();
      throw error;
    }
  });
}
