// The /agents resource: persistent agents. Each handler decodes, makes one AgentService call and answers;
// the stream handler hands the agent's subscription to the SSE helper.
import { requestCaller } from '../caller.js';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { AgentService } from '../../core/agents/agent-service.js';
import { AgentSnapshotSchema, AgentSpawnRequestSchema, type AgentSpawnRequest } from '../../core/agents/agent-types.js';
import { errors } from '../../errors.js';
import { errorResponses, EXAMPLE_SESSION_ID, SLOT_REFUSALS, withExample } from '../schemas.js';
import { lastEventIdOf, relayFollowed, type SseOptions } from '../sse.js';
import type { ClusterForwarding } from '../../core/cluster/forwarding.js';

const EXAMPLE_AGENT_ID = 'agent-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const EXAMPLE_SNAPSHOT = {
  id: EXAMPLE_AGENT_ID,
  session_id: EXAMPLE_SESSION_ID,
  status: 'idle',
  created_at: '2030-01-01T12:00:00.000Z',
  last_activity_at: '2030-01-01T12:00:05.310Z',
  idle_timeout_seconds: 1800,
  turns_completed: 1,
};
const agentNotFound = errors.agentNotFound('<id>');
/** Several nodes: the agent's node did not answer a forwarded request (502), or holds no lease (503). */
const ELSEWHERE = [errors.nodeUnreachable('<node>', '<reason>'), errors.nodeUnavailable('agent <id>', '<node>')];

const SendBodySchema = Type.Object({ prompt: Type.String({ description: 'The turn\'s text.' }) }, { additionalProperties: false });
const IdParams = Type.Object({ id: Type.String({ description: 'Agent id, prefix agent-' }) });
type IdParams = Static<typeof IdParams>;
const StreamQuery = Type.Object(
  { last_event_id: Type.Optional(Type.String({ description: 'As the Last-Event-ID header, for clients that cannot set one; the header wins when both are given.' })) },
  { additionalProperties: false },
);
const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ description: 'The id of the last event received: the events after it that are kept are sent first.' })),
});

const EVENTS = [
  'Each frame is `id: <n>` (the event\'s id in the event log, growing), `event: <type>` and `data: <JSON>` with type, turn_id, content, at.',
  'turn_start: a send was accepted; output: one engine stdout line, verbatim, in content (a line over 10 MiB is replaced by {"type":"berth_truncated",...});',
  'turn_end: the turn completed; error: the engine wrote to stderr or the turn failed (content is the text);',
  'exited: the agent stopped (content is its exit_error); closed: the stream ends (data {}, no id).',
  'A client that reconnects with the header `Last-Event-ID: <the last id it got>` (or `?last_event_id=`) is first sent the events it missed, then live ones, none twice; `0` replays every event kept (SERVICE_EVENTS_MAX_PER_STREAM, SERVICE_EVENTS_MAX_AGE).',
  'When some it missed are no longer kept, an `events_lost` frame (no id) with after and lost_through comes first, then what is kept.',
  'Each subscriber has a buffer of 32 events; a subscriber that falls behind is sent what its buffer dropped again from the event log. Comment lines `: ping` are heartbeats.',
].join(' ');

const EXAMPLE_TURN = 'turn-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a';
const EXAMPLE_EVENTS = [
  'id: 1041',
  'event: turn_start',
  `data: {"type":"turn_start","turn_id":"${EXAMPLE_TURN}","at":"2030-01-01T12:01:00.000Z"}`,
  '',
  'id: 1042',
  'event: output',
  `data: {"type":"output","turn_id":"${EXAMPLE_TURN}","content":"{\\"type\\":\\"assistant\\",…}","at":"2030-01-01T12:01:02.120Z"}`,
  '',
  'id: 1043',
  'event: turn_end',
  `data: {"type":"turn_end","turn_id":"${EXAMPLE_TURN}","at":"2030-01-01T12:01:04.870Z"}`,
  '',
].join('\n');

export interface AgentRouteDependencies {
  readonly agents: AgentService;
  /** Heartbeats, the per-client buffer limit and the server-wide stream limit (http/sse.ts). */
  readonly sse: SseOptions;
  /** Several nodes: the caller's agents on the other nodes are listed too (their records). */
  readonly cluster?: Pick<ClusterForwarding, 'agentsElsewhere'>;
}

export function registerAgentRoutes(app: FastifyInstance, deps: AgentRouteDependencies): void {
  const { agents } = deps;

  app.post<{ Body: AgentSpawnRequest }>(
    '/agents',
    {
      schema: {
        tags: ['agents'],
        summary: 'Spawn a persistent agent (one engine process in one container)',
        description:
          'Answers at once with status starting; the agent becomes idle when the engine is ready. The engine always reads and writes stream-json and runs verbose; the other engine options apply as on POST /run; of the container options only `container.network` (the agent\'s egress policy) is accepted. A session the agent creates is hidden: GET /sessions does not list it and its messages are not served.',
        body: withExample(AgentSpawnRequestSchema, { prompt: 'Read the failing test and fix it', workdir: '/work/project', idle_timeout_seconds: 600, engine: { model: 'sonnet' } }),
        response: {
          200: withExample(AgentSnapshotSchema, { ...EXAMPLE_SNAPSHOT, status: 'starting', last_activity_at: EXAMPLE_SNAPSHOT.created_at, idle_timeout_seconds: 600, turns_completed: 0 }),
          ...errorResponses(
            400,
            401,
            errors.sessionNotFound('<session_id>'),
            errors.sessionBusy('<session_id>'),
            errors.workspaceNotFound('<workspace>'),
            errors.workspaceBusy('<workspace>'),
            413,
            429,
            ...SLOT_REFUSALS,
            errors.agentSpawnFailed('<reason>'),
            errors.engineNotConfigured('<reason>'),
            errors.runtimeUnavailable('<reason>'),
          ),
        },
      },
    },
    async (request) => agents.spawn(request.body ?? {}, requestCaller(request)),
  );

  app.get(
    '/agents',
    {
      schema: {
        tags: ['agents'],
        summary: 'List the caller\'s agents (on every node of a cluster), exited ones included until their retention ends',
        response: { 200: withExample(Type.Object({ agents: Type.Array(AgentSnapshotSchema) }), { agents: [EXAMPLE_SNAPSHOT] }), ...errorResponses(401, 429) },
      },
    },
    async (request) => {
      const caller = requestCaller(request);
      const here = agents.list(caller);
      if (!deps.cluster) return { agents: here };
      const all = [...here, ...(await deps.cluster.agentsElsewhere(caller))];
      return { agents: all.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id)) };
    },
  );

  app.get<{ Params: IdParams }>(
    '/agents/:id',
    {
      schema: {
        tags: ['agents'],
        summary: 'Read an agent\'s snapshot',
        params: IdParams,
        response: { 200: withExample(AgentSnapshotSchema, EXAMPLE_SNAPSHOT), ...errorResponses(401, agentNotFound, 429, ...ELSEWHERE) },
      },
    },
    async (request) => agents.get(request.params.id, requestCaller(request)),
  );

  app.post<{ Params: IdParams; Body: Static<typeof SendBodySchema> }>(
    '/agents/:id/send',
    {
      schema: {
        tags: ['agents'],
        summary: 'Send a turn; answers once the engine has it, the output arrives on the stream',
        params: IdParams,
        body: withExample(SendBodySchema, { prompt: 'Now run the whole test suite' }),
        response: {
          200: withExample(Type.Object({ turn_id: Type.String({ description: 'prefix turn-; the turn\'s events carry it' }) }), {
            turn_id: 'turn-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a',
          }),
          ...errorResponses(400, 401, agentNotFound, errors.agentBusy('<id>'), errors.agentExited('<id>', '<exit_error>'), 413, 429, errors.agentNotReady('<id>'), errors.agentSendTimeout('<id>', '<SERVICE_AGENT_SEND_TIMEOUT>'), ...ELSEWHERE),
        },
      },
    },
    async (request) => agents.send(request.params.id, request.body.prompt, requestCaller(request)),
  );

  app.get<{ Params: IdParams; Querystring: Static<typeof StreamQuery>; Headers: Static<typeof StreamHeaders> }>(
    '/agents/:id/stream',
    {
      schema: {
        tags: ['agents'],
        summary: 'Follow an agent\'s events as Server-Sent Events',
        description: EVENTS,
        params: IdParams,
        querystring: StreamQuery,
        headers: StreamHeaders,
        response: {
          200: { description: EVENTS, content: { 'text/event-stream': { schema: Type.String(), example: EXAMPLE_EVENTS } } },
          ...errorResponses(400, 401, agentNotFound, 429, errors.tooManySubscribers('<id>', '<limit>'), errors.streamsAtCapacity('<limit>'), ...ELSEWHERE),
        },
      },
    },
    async (request, reply) => {
      const afterId = lastEventIdOf(request.headers['last-event-id'], request.query.last_event_id);
      const followed = agents.follow(request.params.id, requestCaller(request), afterId);
      // A slow client is waited for, so that its subscription buffer (not the socket) fills and drops.
      await relayFollowed(reply, deps.sse, followed, { waitForDrain: true });
    },
  );

  app.delete<{ Params: IdParams }>(
    '/agents/:id',
    {
      schema: {
        tags: ['agents'],
        summary: 'Stop an agent (SIGTERM, SIGKILL after 5 s) and remove its container',
        description:
          'Answers once the engine has stopped, whatever its status (a starting agent too). The record stays readable, as exited, for SERVICE_AGENT_EXITED_RETENTION; deleting an exited agent forgets it.',
        params: IdParams,
        response: { 204: Type.Null({ description: 'Stopped; no body.' }), ...errorResponses(401, agentNotFound, 429, ...ELSEWHERE) },
      },
    },
    async (request, reply) => {
      await agents.remove(request.params.id, requestCaller(request));
      return reply.code(204).send();
    },
  );
}
