// The Fastify application: error handling, validators, OpenAPI, cross-cutting plugins, then every route
// group of ./routes/index.ts. Everything it serves comes in through AppServices; it builds nothing of the
// domain itself.
import { registerRequestTracing } from './plugins/tracing.js';
import { join } from 'node:path';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { errors } from '../errors.js';
import { registerErrorHandler } from './error-handler.js';
import { createValidatorCompiler } from './validators.js';
import { ErrorBodySchema } from './schemas.js';
import { API_DESCRIPTION } from './api-description.js';
import { registerAuth } from './plugins/auth.js';
import { registerRateLimit } from './plugins/rate-limit.js';
import { registerHttpMetrics } from './plugins/http-metrics.js';
import { registerForwarding } from './plugins/forward.js';
import { ROUTE_GROUPS, type RouteServices } from './routes/index.js';

/** The web console's build (packages/console/dist), served at /console. */
export const CONSOLE_DIST = join(import.meta.dirname, '..', '..', 'packages', 'console', 'dist');

/** What the application reads of the configuration: the body limit, OpenAPI's version and security, rate limiting. */
export type AppSettings = Pick<Config, 'maxBodyBytes' | 'version' | 'rateLimit'> & { readonly auth: Pick<Config['auth'], 'enabled'> };

/** The services the routes call, and what the application itself needs beside them. */
export interface AppServices extends RouteServices {
  readonly config: AppSettings;
  readonly logger: Logger;
}

export async function buildApp(services: AppServices): Promise<FastifyInstance> {
  const { config } = services;
  const app = Fastify({
    loggerInstance: services.logger,
    bodyLimit: config.maxBodyBytes,
    // Berth writes its own single line per request (below) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => `req-${Math.random().toString(36).slice(2, 10)}`,
  }) as unknown as FastifyInstance; // pino's Logger is a FastifyBaseLogger; only the generic differs
  app.setValidatorCompiler(createValidatorCompiler());
  // Clients send Content-Type: application/json on DELETE too, usually without a body:
  // an empty body is "no body", not a parse error. Non-empty bodies keep Fastify's safe JSON parser.
  // Bytes that are not UTF-8 are refused, not silently replaced by U+FFFD.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (body.length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(errors.badRequest('request body is not valid UTF-8'), undefined);
    }
    return parseJson(request, text, done);
  });
  registerErrorHandler(app);
  app.addSchema(ErrorBodySchema);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Berth',
        description: API_DESCRIPTION,
        version: config.version,
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
      security: config.auth.enabled ? [{ bearer: [] }] : [],
    },
    // Shared schemas keep their own names (ErrorBody) in components/schemas instead of def-0.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });

  // One log line per request, with its id and duration.
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      { method: request.method, route: request.routeOptions.url ?? request.url, status: reply.statusCode, durationMs: Math.round(reply.elapsedTime) },
      'request',
    );
  });

  registerRequestTracing(app);
  registerHttpMetrics(app, services.metrics);
  // Rate limiting runs before authentication so that a flood of bad tokens is limited too.
  if (config.rateLimit.enabled) {
    registerRateLimit(app, {
      rps: config.rateLimit.rps,
      burst: config.rateLimit.burst,
      trustedProxies: config.rateLimit.trustedProxies,
      metrics: services.metrics,
    });
  }
  registerAuth(app, { enabled: config.auth.enabled, auth: services.auth, metrics: services.metrics });
  // After authentication: a request is forwarded to the node that runs its agent or job only once its caller
  // is known here (and the owner authenticates it again).
  if (services.cluster) {
    const { agents } = services;
    registerForwarding(app, { ...services.cluster, runsAgent: (id) => agents.holds(id), sse: services.sse });
  }

  app.get('/swagger/doc.json', { schema: { hide: true } }, async () => app.swagger());
  for (const register of ROUTE_GROUPS) await register(app, services);
  return app;
}
