// POST /run: the synchronous run.
import type { FastifyInstance } from 'fastify';
import { RunRequestSchema, type RunRequest } from '../../core/run-request.js';
import type { RunService } from '../../core/runs/run-service.js';
import { errorResponses, RunResponseSchema } from '../schemas.js';
import { abortOnDisconnect } from '../disconnect.js';
import { requestCaller } from '../caller.js';

export function registerRunRoutes(app: FastifyInstance, deps: { runs: RunService }): void {
  app.post<{ Body: RunRequest }>(
    '/run',
    {
      schema: {
        tags: ['runs'],
        summary: 'Run a prompt and wait for the result',
        body: RunRequestSchema,
        response: { 200: RunResponseSchema, ...errorResponses(400, 401, 404, 409, 413, 429, 500, 503) },
      },
    },
    async (request, reply) => {
      const signal = abortOnDisconnect(reply.raw);
      return deps.runs.runSync(request.body, signal, requestCaller(request));
    },
  );
}
