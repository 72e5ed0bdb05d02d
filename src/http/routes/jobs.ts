// POST /run/async and the /jobs resource. Each handler decodes, makes one JobService call and answers.
import { requestCaller } from '../caller.js';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { RunRequestSchema, type RunRequest } from '../../core/run-request.js';
import { JOB_LIST_DEFAULT_LIMIT, JOB_LIST_MAX_LIMIT, type JobService } from '../../core/jobs/job-service.js';
import { JOB_STATUSES } from '../../core/jobs/job-view.js';
import { errors } from '../../errors.js';
import { errorResponses, EXAMPLE_RUN_REQUEST, EXAMPLE_SESSION_ID, RUN_REFUSALS, withExample } from '../schemas.js';
import { lastEventIdOf, relayFollowed, type SseOptions } from '../sse.js';

const JobStatusSchema = Type.Union(JOB_STATUSES.map((status) => Type.Literal(status)));

const CrashInfoSchema = Type.Object(
  {
    exit_code: Type.Integer({ description: 'Container exit code (137 after a kill); -1 when the service restarted.' }),
    signal: Type.String({ description: 'Signal that ended the engine, e.g. SIGKILL; empty when none is known.' }),
    partial_output: Type.String({ description: 'The engine\'s stream-json lines printed before the end.' }),
    task_completed: Type.Boolean({ description: 'Whether a successful final result had been printed.' }),
    reason: Type.Union(['oom', 'timeout', 'signal', 'service_stop', 'service_restart', 'node_lost'].map((r) => Type.Literal(r))),
  },
  { description: 'Set when status is crashed, null otherwise.' },
);

const JobSchema = Type.Object({
  id: Type.String({ description: 'Job id, prefix job-' }),
  status: JobStatusSchema,
  output: Type.String({ description: 'The engine\'s final answer once completed; empty before.' }),
  structured_output: Type.Optional(Type.Unknown({ description: 'As in the run response: with output_format json and a json_schema.' })),
  session_id: Type.String({ format: 'uuid', description: 'Known from submission on.' }),
  crash_info: Type.Union([CrashInfoSchema, Type.Null()], { description: 'Set when status is crashed, null otherwise.' }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the job did not complete; null otherwise.' }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time', description: 'Time of the last status change.' }),
  finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Set in a final state: completed, failed, crashed or cancelled.' }),
});

const EXAMPLE_JOB_ID = 'job-4e9b2c7d-0a1f-4b3e-8c5d-6f7a9b1c2d3e';
const jobNotFound = errors.jobNotFound('<id>');

const JobListQuerySchema = Type.Object(
  {
    status: Type.Optional(Type.Union(JOB_STATUSES.map((status) => Type.Literal(status)), { description: 'Only jobs in this status' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: JOB_LIST_MAX_LIMIT, default: JOB_LIST_DEFAULT_LIMIT, description: `Jobs per page, 1–${JOB_LIST_MAX_LIMIT}` })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Jobs skipped' })),
  },
  { additionalProperties: false },
);

const JobIdParams = Type.Object({ id: Type.String({ description: 'Job id, as answered by POST /run/async' }) });

const JOB_EVENTS = [
  'Each frame is `id: <n>`, `event: status` and `data: {"type":"status","status":"<status>","error":"…","at":"…"}`: the job\'s history first (pending, running, …), then its changes as they happen, until its final status (completed, failed, crashed or cancelled), then `event: closed` (data {}, no id) and the stream ends; read the result with GET /jobs/{id}.',
  'A client that reconnects with `Last-Event-ID` (or `?last_event_id=`) is sent only the events after that id.',
  'Events no longer kept (SERVICE_EVENTS_MAX_AGE) are announced by an `events_lost` frame (no id); the final status is then sent from the job\'s record, without an id. Comment lines `: ping` are heartbeats.',
].join(' ');

const EXAMPLE_JOB_EVENTS = [
  'id: 2051',
  'event: status',
  'data: {"type":"status","status":"pending","at":"2030-01-01T12:00:00.000Z"}',
  '',
  'id: 2052',
  'event: status',
  'data: {"type":"status","status":"running","at":"2030-01-01T12:00:00.210Z"}',
  '',
  'id: 2060',
  'event: status',
  'data: {"type":"status","status":"completed","at":"2030-01-01T12:00:07.412Z"}',
  '',
  'event: closed',
  'data: {}',
  '',
].join('\n');

const JobStreamQuery = Type.Object(
  { last_event_id: Type.Optional(Type.String({ description: 'As the Last-Event-ID header, for clients that cannot set one; the header wins when both are given.' })) },
  { additionalProperties: false },
);
const JobStreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ description: 'The id of the last event received: only the events after it are sent.' })),
});

export function registerJobRoutes(app: FastifyInstance, deps: { jobs: JobService; sse: SseOptions }): void {
  const { jobs } = deps;

  app.post<{ Body: RunRequest }>(
    '/run/async',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Queue a run as a job and answer at once',
        description:
          'The request is validated and its session taken before the answer, so refusals are the same as POST /run\'s. The job then waits for a run slot (SERVICE_MAX_CONCURRENT_RUNS) as pending. With webhook_url, Berth POSTs the job.finished payload there when the job ends.',
        body: withExample(RunRequestSchema, { ...EXAMPLE_RUN_REQUEST, webhook_url: 'https://ci.example.com/hooks/berth' }),
        response: {
          200: withExample(
            Type.Object({ job_id: Type.String({ description: 'prefix job-' }), session_id: Type.String({ format: 'uuid', description: 'The session the run will use' }) }),
            { job_id: EXAMPLE_JOB_ID, session_id: EXAMPLE_SESSION_ID },
          ),
          ...errorResponses(...RUN_REFUSALS),
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
          200: withExample(
            Type.Object({ jobs: Type.Array(Type.Object({ id: Type.String(), status: JobStatusSchema, created_at: Type.String({ format: 'date-time' }) })) }),
            { jobs: [{ id: EXAMPLE_JOB_ID, status: 'running', created_at: '2030-01-01T12:00:00.000Z' }] },
          ),
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request) => ({ jobs: await jobs.list(request.query, requestCaller(request)) }),
  );

  app.get<{ Params: Static<typeof JobIdParams> }>(
    '/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Read a job',
        description: 'Statuses: pending → running → completed, failed or crashed; pending or running → cancelled by DELETE. After a restart of the service, jobs found running are followed again (crashed with crash_info.reason service_restart only when their container is gone) and jobs found pending are run.',
        params: JobIdParams,
        response: {
          200: withExample(JobSchema, {
            id: EXAMPLE_JOB_ID,
            status: 'completed',
            output: 'Berth runs the Claude Code CLI in rootless Podman containers and returns its output.',
            session_id: EXAMPLE_SESSION_ID,
            crash_info: null,
            error: null,
            created_at: '2030-01-01T12:00:00.000Z',
            updated_at: '2030-01-01T12:00:07.412Z',
            finished_at: '2030-01-01T12:00:07.412Z',
          }),
          ...errorResponses(401, jobNotFound, 429),
        },
      },
    },
    async (request) => jobs.get(request.params.id, requestCaller(request)),
  );

  app.get<{ Params: Static<typeof JobIdParams>; Querystring: Static<typeof JobStreamQuery>; Headers: Static<typeof JobStreamHeaders> }>(
    '/jobs/:id/stream',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Follow a job\'s status as Server-Sent Events, until it finishes',
        description: JOB_EVENTS,
        params: JobIdParams,
        querystring: JobStreamQuery,
        headers: JobStreamHeaders,
        response: {
          200: { description: JOB_EVENTS, content: { 'text/event-stream': { schema: Type.String(), example: EXAMPLE_JOB_EVENTS } } },
          ...errorResponses(400, 401, jobNotFound, 429, errors.streamsAtCapacity('<limit>'), errors.nodeUnreachable('<node>', '<reason>')),
        },
      },
    },
    async (request, reply) => {
      const afterId = lastEventIdOf(request.headers['last-event-id'], request.query.last_event_id);
      const followed = await jobs.follow(request.params.id, requestCaller(request), afterId);
      // A client that leaves ends its subscription (the job goes on).
      await relayFollowed(reply, deps.sse, followed, { waitForDrain: false });
    },
  );

  app.delete<{ Params: Static<typeof JobIdParams> }>(
    '/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Cancel a pending or running job (its container is killed and removed)',
        params: JobIdParams,
        response: {
          200: withExample(Type.Object({ id: Type.String(), status: Type.Literal('cancelled') }), { id: EXAMPLE_JOB_ID, status: 'cancelled' }),
          ...errorResponses(401, jobNotFound, errors.jobFinished('<id>', '<status>'), 429, errors.nodeUnreachable('<node>', '<reason>')),
        },
      },
    },
    async (request) => jobs.cancel(request.params.id, requestCaller(request)),
  );
}
