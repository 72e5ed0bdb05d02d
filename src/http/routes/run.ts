// POST /run: the synchronous run.
import type { FastifyInstance } from 'fastify';
import { RunRequestSchema, type RunRequest } from '../../core/run-request.js';
import type { RunService } from '../../core/runs/run-service.js';
import { errorResponses, EXAMPLE_RUN_REQUEST, EXAMPLE_RUN_RESPONSE, RUN_FAILURES, RUN_REFUSALS, SLOT_REFUSALS, withExample } from '../schemas.js';
import { RunResultSchema } from '../../core/runs/run-result.js';
import { abortOnDisconnect } from '../disconnect.js';
import { requestCaller } from '../caller.js';

export function registerRunRoutes(app: FastifyInstance, deps: { runs: RunService }): void {
  app.post<{ Body: RunRequest }>(
    '/run',
    {
      schema: {
        tags: ['runs'],
        summary: 'Run a prompt and wait for the result',
        description:
          'Answers when the run has ended. A run that starts a session (the default, or no_persistence) is answered as soon as its engine has written its result; the engine\'s exit, the removal of its container and the keeping of its transcript follow at once, and any request that reads or takes that session waits for them. A client that disconnects before the answer stops the run; its container is removed either way.',
        body: withExample(RunRequestSchema, EXAMPLE_RUN_REQUEST),
        response: { 200: withExample(RunResultSchema, EXAMPLE_RUN_RESPONSE), ...errorResponses(...RUN_REFUSALS, ...SLOT_REFUSALS, ...RUN_FAILURES) },
      },
    },
    async (request, reply) => {
      const signal = abortOnDisconnect(reply.raw);
      return deps.runs.runSync(request.body, signal, requestCaller(request));
    },
  );
}
