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
import { errorResponses } from '../schemas.js';

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
      description: 'Name of the caller; becomes the tokens\' sub claim. 1–256 characters, no control characters.',
    }),
  },
  { additionalProperties: false },
);

const RefreshRequest = Type.Object(
  { refresh_token: Type.String({ minLength: 1, maxLength: 4096 }) },
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
  valid: Type.Boolean(),
  claims: Type.Object({
    sub: Type.String(),
    exp: Type.Integer({ description: 'Expiry, seconds since the epoch.' }),
  }),
});

const LogoutResponse = Type.Object({ success: Type.Boolean() });

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
      body: TokenRequest,
      response: { 200: TokenPairResponse, ...errorResponses(400, 401) },
    },
    // Checked before the body is parsed and validated, so a caller without an API token learns nothing.
    onRequest: async (request) =>
      counted(async () => {
        deps.auth.checkApiToken(bearerToken(request.headers.authorization));
      }),
  }, async (request) => {
    return deps.auth.issue(request.body.client_id);
  });

  api.post('/auth/refresh', {
    schema: {
      tags: ['auth'],
      summary: 'Exchange a refresh token for a new access token and a new (rotated) refresh token',
      security: [],
      body: RefreshRequest,
      response: { 200: TokenPairResponse, ...errorResponses(400, 401, 503) },
    },
  }, async (request) =>
    counted(() => deps.auth.refresh(request.body.refresh_token)));

  api.post('/auth/validate', {
    schema: {
      tags: ['auth'],
      summary: 'Check the presented access token and return its subject and expiry',
      response: { 200: ValidateResponse, ...errorResponses(401, 503) },
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
      body: LogoutRequest,
      response: { 200: LogoutResponse, ...errorResponses(400, 401, 503) },
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
