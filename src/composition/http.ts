// The API: the Fastify application over the routes' services, closed at stop after the work it serves has
// ended or been cut (core/shutdown.ts), and its listener on SERVICE_ADDRESS.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { buildApp } from '../http/app.js';
import type { RouteServices } from '../http/routes/index.js';
import type { Teardown } from './teardown.js';

export interface HttpInputs {
  readonly config: Config;
  readonly services: RouteServices;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export async function buildHttp({ config, services, logger, teardown }: HttpInputs): Promise<FastifyInstance> {
  const app = await buildApp({ ...services, config, logger });
  teardown.endWork(async () => {
    const closing = app.close();
    // Detached: requests still open (a sync run, streams) are cut; their work goes on without them. In the
    // other modes their work has ended by now and their answers are let out.
    if (config.shutdown.mode === 'detach') app.server.closeAllConnections();
    // An answer let out during the close (a git clone the stop ended) leaves its keep-alive connection idle
    // after Fastify closed the idle ones: it would hold the close for Fastify's keepAliveTimeout (72 s).
    const idle = setInterval(() => app.server.closeIdleConnections(), 100);
    try {
      await closing;
    } finally {
      clearInterval(idle);
    }
  });
  return app;
}

/** Starts the API listener; answers its URL (the port the system chose when SERVICE_ADDRESS names port 0). */
export async function listen(app: FastifyInstance, address: Config['address']): Promise<string> {
  await app.listen({ host: address.host, port: address.port });
  const bound = app.server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  return `http://${address.host.includes(':') ? `[${address.host}]` : address.host}:${port}`;
}
