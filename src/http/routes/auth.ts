// /auth/token, /auth/refresh, /auth/validate, /auth/logout. Issuing, rotation and revocation live in
// core/auth/auth-service.ts and the access-token gate in plugins/auth.ts; these handlers only decode,
// call and answer.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthService } from '../../core/auth/auth-service.js';
import type { TokenClaims } from '../../core/auth/tokens.js';
import type { Metrics } from '../../metrics/metrics.js';
import { authFailureReason, authenticate, bearerToken } from '../plugins/auth.js';
import { errors } from '../../errors.js';
import { errorResponses, withExample } from '../schemas.js';

// Shortened JWTs for the examples.
const EXAMPLE_PAIR = { access_token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjaS1ib3QiLCJ0eXAiOiJhY2Nlc3MifQ.Qk…', refresh_token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjaS1ib3QiLCJ0eXAiOiJyZWZyZXNoIn0.Zp…', token_type: 'Bearer', expires_in: 86400 };
const blacklistFailed = errors.blacklistUnavailable('the blacklist backend failed; the request was refused, retry later');

export interface AuthRoutesDeps {
  readonly auth: AuthService;
  /** When given, refused API tokens and refresh tokens are counted in berth_auth_failures_total. */
  readonly metrics?: Metrics;
}

const TokenPairResponse = Type.Object({
  access_token: Type.String({ description: 'HS256 JWT for Authorization: Bearer on protected endpoints.' }),
  refresh_token: Type.String({ description: 'Single-use HS256 JWT for POST /auth/refresh; rotated on every refresh.' }),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Lifetime of access_token in seconds (SERVICE_JWT_EXPIRY; 86400 by default).' }),
});

const TokenRequest = Type.Object(
  {
    client_id: Type.String({
      minLength: 1,
      maxLength: 256,
      description: 'A label for this client (kept in the tokens\' client_id claim). It does not choose the owner: the tokens\' sub is the name of the API token presented. 1–256 characters, no control characters.',
    }),
  },
  { additionalProperties: false },
);

const RefreshRequest = Type.Object(
  { refresh_token: Type.String({ minLength: 1, maxLength: 4096, description: 'The refresh token of POST /auth/token or of the last refresh.' }) },
  { additionalProperties: false },
);

// The body is optional: a bare `POST /auth/logout` with no body revokes the access token only.
const LogoutRequest = Type.Object(
  {
    refresh_token: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: 'Optional: the refresh token of the same client, blacklisted too so it cannot mint new access tokens.',
      }),
    ),
  },
  { additionalProperties: false },
);

const ValidateResponse = Type.Object({
  valid: Type.Boolean({ description: 'Always true: an invalid token is a 401' }),
  claims: Type.Object({
    sub: Type.String({ description: 'The owner: the name of the API token the token was obtained with (token:<fingerprint> for an unnamed one)' }),
    exp: Type.Integer({ description: 'Expiry, seconds since the epoch.' }),
  }),
});

const LogoutResponse = Type.Object({ success: Type.Boolean({ description: 'True once the token(s) are blacklisted' }) });

export function registerAuthRoutes(app: FastifyInstance, deps: AuthRoutesDeps): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  const counted = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      const reason = authFailureReason(error);
      if (reason) deps.metrics?.authFailures.labels(reason).inc();
      throw error;
    }
  };

  // The caller's access token: already verified by the auth plugin, or verified here when the plugin is
  // not registered (authentication disabled), so these routes never answer for an unchecked token.
  const accessClaims = (request: FastifyRequest): Promise<TokenClaims> =>
    request.auth ? Promise.resolve(request.auth) : counted(() => authenticate(request, deps.auth));

  api.post('/auth/token', {
    schema: {
      tags: ['auth'],
      summary: 'Exchange an API token (Authorization: Bearer <API token>) for an access and a refresh token',
      description: 'The API token is checked before the body is read, so a caller without one learns nothing about the body\'s rules.',
      body: withExample(TokenRequest, { client_id: 'ci-bot' }),
      response: { 200: withExample(TokenPairResponse, EXAMPLE_PAIR), ...errorResponses(400, 401, errors.tokenRequired(), errors.invalidApiToken()) },
    },
    // Checked before the body is parsed and validated, so a caller without an API token learns nothing.
    onRequest: async (request) =>
      counted(async () => {
        deps.auth.checkApiToken(bearerToken(request.headers.authorization));
      }),
  }, async (request) => {
    return deps.auth.issue(bearerToken(request.headers.authorization), request.body.client_id);
  });

  api.post('/auth/refresh', {
    schema: {
      tags: ['auth'],
      summary: 'Exchange a refresh token for a new access token and a new (rotated) refresh token',
      security: [],
      description: 'The refresh token in the body is the credential. Each refresh token works once; the answer carries its replacement.',
      body: withExample(RefreshRequest, { refresh_token: EXAMPLE_PAIR.refresh_token }),
      response: {
        200: withExample(TokenPairResponse, EXAMPLE_PAIR),
        ...errorResponses(400, errors.invalidToken(), errors.tokenExpired(), errors.tokenBlacklisted(), blacklistFailed),
      },
    },
  }, async (request) =>
    counted(() => deps.auth.refresh(request.body.refresh_token)));

  api.post('/auth/validate', {
    schema: {
      tags: ['auth'],
      summary: 'Check the presented access token and return its subject and expiry',
      response: { 200: withExample(ValidateResponse, { valid: true, claims: { sub: 'ci-bot', exp: 1893499200 } }), ...errorResponses(401, blacklistFailed) },
    },
  }, async (request) => {
    const claims = await accessClaims(request);
    return { valid: true, claims: { sub: claims.sub, exp: claims.exp } };
  });

  api.post('/auth/logout', {
    schema: {
      tags: ['auth'],
      summary: 'Blacklist the presented access token (and optionally a refresh token) until it expires',
      description: 'The body is optional (send none, or {}): without refresh_token only the access token is revoked. 503 when no blacklist is configured or recording fails.',
      body: withExample(LogoutRequest, { refresh_token: EXAMPLE_PAIR.refresh_token }),
      response: {
        200: withExample(LogoutResponse, { success: true }),
        ...errorResponses(
          400,
          401,
          errors.blacklistUnavailable('no token blacklist is configured'),
          errors.blacklistUnavailable('the blacklist backend failed; the token was not revoked, retry later'),
        ),
      },
    },
    // Fastify validates an absent body against the schema; a logout without a body means {}.
    preValidation: async (request) => {
      request.body ??= {};
    },
  }, async (request) => {
    const claims = await accessClaims(request);
    await counted(() => deps.auth.logout(claims, request.body.refresh_token));
    return { success: true };
  });
}
