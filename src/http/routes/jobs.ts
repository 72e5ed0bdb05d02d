// POST /run/async and the /jobs resource. Each handler decodes, makes one JobService call and answers.
import { requestCaller } from '../caller.js';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { RunRequestSchema, type RunRequest } from '../../core/run-request.js';
import { JOB_LIST_DEFAULT_LIMIT, JOB_LIST_MAX_LIMIT, type JobService } from '../../core/jobs/job-service.js';
import { JOB_STATUSES } from '../../core/jobs/job-view.js';
import { errorResponses } from '../schemas.js';

const JobStatusSchema = Type.Union(JOB_STATUSES.map((status) => Type.Literal(status)));

const CrashInfoSchema = Type.Object(
  {
    exit_code: Type.Integer({ description: 'Container exit code (137 after a kill); -1 when the service restarted.' }),
    signal: Type.String({ description: 'Signal that ended the engine, e.g. SIGKILL; empty when none is known.' }),
    partial_output: Type.String({ description: 'The engine\'s stream-json lines printed before the end.' }),
    task_completed: Type.Boolean({ description: 'Whether a successful final result had been printed.' }),
    reason: Type.Union(['oom', 'timeout', 'signal', 'service_stop', 'service_restart'].map((r) => Type.Literal(r))),
  },
  { description: 'Set when status is crashed, null otherwise.' },
);

const JobSchema = Type.Object({
  id: Type.String({ description: 'Job id, prefix job-' }),
  status: JobStatusSchema,
  output: Type.String(),
  structured_output: Type.Optional(Type.Unknown()),
  session_id: Type.String({ format: 'uuid' }),
  crash_info: Type.Union([CrashInfoSchema, Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the job did not complete; null otherwise.' }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const JobListQuerySchema = Type.Object(
  {
    status: Type.Optional(JobStatusSchema),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: JOB_LIST_MAX_LIMIT, default: JOB_LIST_DEFAULT_LIMIT })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  },
  { additionalProperties: false },
);

const JobIdParams = Type.Object({ id: Type.String() });

export function registerJobRoutes(app: FastifyInstance, deps: { jobs: JobService }): void {
  const { jobs } = deps;

  app.post<{ Body: RunRequest }>(
    '/run/async',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Queue a run as a job and answer at once',
        body: RunRequestSchema,
        response: {
          200: Type.Object({ job_id: Type.String({ description: 'prefix job-' }), session_id: Type.String({ format: 'uuid' }) }),
          ...errorResponses(400, 401, 404, 409, 413, 429, 503),
        },
      },
    },
    async (request) => jobs.submit(request.body, requestCaller(request)),
  );

  app.get<{ Querystring: Static<typeof JobListQuerySchema> }>(
    '/jobs',
    {
      schema: {
        tags: ['jobs'],
        summary: 'List jobs, newest first',
        querystring: JobListQuerySchema,
        response: {
          200: Type.Object({ jobs: Type.Array(Type.Object({ id: Type.String(), status: JobStatusSchema, created_at: Type.String({ format: 'date-time' }) })) }),
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request) => ({ jobs: await jobs.list(request.query, requestCaller(request)) }),
  );

  app.get<{ Params: Static<typeof JobIdParams> }>(
    '/jobs/:id',
    { schema: { tags: ['jobs'], summary: 'Read a job', params: JobIdParams, response: { 200: JobSchema, ...errorResponses(401, 404, 429) } } },
    async (request) => jobs.get(request.params.id, requestCaller(request)),
  );

  app.delete<{ Params: Static<typeof JobIdParams> }>(
    '/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Cancel a pending or running job (its container is killed and removed)',
        params: JobIdParams,
        response: { 200: Type.Object({ id: Type.String(), status: Type.Literal('cancelled') }), ...errorResponses(401, 404, 409, 429) },
      },
    },
    async (request) => jobs.cancel(request.params.id, requestCaller(request)),
  );
}
