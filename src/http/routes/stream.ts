// GET /run/stream: a run whose assistant text arrives as Server-Sent Events. The request is validated and
// its session taken before the stream opens, so refusals are ordinary JSON errors; after that, the end
// of the run is a `done` frame or an `error` frame, and a client that leaves stops the run.
import { requestCaller } from '../caller.js';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { RunRequest } from '../../core/run-request.js';
import type { RunService } from '../../core/runs/run-service.js';
import { errors } from '../../errors.js';
import { errorResponses, EXAMPLE_SESSION_ID, RUN_REFUSALS, SLOT_REFUSALS } from '../schemas.js';
import { streamEvents, type SseOptions } from '../sse.js';

const StreamQuerySchema = Type.Object(
  {
    prompt: Type.String({ description: 'Text given to the agent. Required and non-empty.', examples: ['say: hello'] }),
    workdir: Type.Optional(Type.String({ description: 'Working directory inside the container. Default /workspace.' })),
    workspace: Type.Optional(Type.String({ description: 'A workspace of the caller (UUID) mounted read-write at the workdir, as in POST /run.' })),
    session_id: Type.Optional(Type.String({ description: 'Session to resume (UUID); resume defaults to true when it is given.' })),
    resume: Type.Optional(Type.Boolean({ description: 'Continue the session named by session_id. Default false.' })),
    network: Type.Optional(
      Type.Union([Type.Literal('none'), Type.Literal('allowlist'), Type.Literal('open')], {
        description: "What the run may reach through Berth's egress proxy, as POST /run's container.network.mode. Default allowlist (the operator's SERVICE_EGRESS_DEFAULT_ALLOW unless allow is given).",
      }),
    ),
    allow: Type.Optional(
      Type.String({
        description: "Hosts the run may reach, comma-separated (container.network.allow of POST /run), e.g. `pypi.org,*.npmjs.org,example.com:8443`; empty: none but the model gateway. Implies network=allowlist.",
        examples: ['pypi.org,*.npmjs.org'],
      }),
    ),
  },
  { additionalProperties: false },
);
type StreamQuery = Static<typeof StreamQuerySchema>;

const FRAMES = [
  'Frames are `data: <JSON>` lines:',
  '{"type":"output","content":"..."} for each piece of assistant text as the engine produces it;',
  '{"type":"done","session_id":"...","id":"run-..."} when the run completed;',
  '{"type":"error","error":"..."} when it failed after the stream started.',
  'Comment lines `: ping` are heartbeats (SERVICE_SSE_HEARTBEAT_INTERVAL).',
].join(' ');

const EXAMPLE_FRAMES = [
  'data: {"type":"output","content":"hello"}',
  '',
  `data: {"type":"done","session_id":"${EXAMPLE_SESSION_ID}","id":"run-8d2f4b6a-1c3e-4f5a-9b7d-0e2c4a6f8b1d"}`,
  '',
].join('\n');

export interface StreamRouteDependencies {
  readonly runs: RunService;
  /** Heartbeats, the per-client buffer limit and the server-wide stream limit (http/sse.ts). */
  readonly sse: SseOptions;
}

/**
 * The query as a run request. Resuming is the only session operation here, so session_id alone resumes.
 * `network` and `allow` become container.network, checked (and refused, naming container.network) as in
 * POST /run.
 */
export function toRunRequest(query: StreamQuery): RunRequest {
  const engine = {
    ...(query.session_id !== undefined ? { session_id: query.session_id } : {}),
    ...(query.resume !== undefined || query.session_id !== undefined ? { resume: query.resume ?? true } : {}),
  };
  // `allow=` (empty) is the empty list: only the model gateway.
  const allow = query.allow === undefined ? undefined : query.allow.trim() === '' ? [] : query.allow.split(',').map((host) => host.trim());
  const network = query.network !== undefined || allow !== undefined ? { mode: query.network ?? 'allowlist', ...(allow !== undefined ? { allow } : {}) } : undefined;
  return {
    prompt: query.prompt,
    ...(query.workdir !== undefined ? { workdir: query.workdir } : {}),
    ...(query.workspace !== undefined ? { workspace: query.workspace } : {}),
    ...(Object.keys(engine).length > 0 ? { engine } : {}),
    ...(network !== undefined ? { container: { network } } : {}),
  };
}

export function registerStreamRoutes(app: FastifyInstance, deps: StreamRouteDependencies): void {
  app.get<{ Querystring: StreamQuery }>(
    '/run/stream',
    {
      schema: {
        tags: ['runs'],
        summary: 'Run a prompt and stream its output as Server-Sent Events',
        description: FRAMES,
        querystring: StreamQuerySchema,
        response: {
          200: { description: FRAMES, content: { 'text/event-stream': { schema: Type.String(), example: EXAMPLE_FRAMES } } },
          // Failures after the stream opened arrive as an error frame, not as a status.
          ...errorResponses(...RUN_REFUSALS, ...SLOT_REFUSALS, errors.streamsAtCapacity('<limit>')),
        },
      },
    },
    async (request, reply) => {
      const { runs } = deps;
      const accepted = await runs.accept(toRunRequest(request.query), { caller: requestCaller(request) });
      await streamEvents(reply, deps.sse, async (events) => {
        if (events.signal.aborted) {
          await runs.abandon(accepted);
          return;
        }
        const outcome = await runs.executeUntilAnswered(accepted, 'stream', events.signal, {
          onText: (content) => events.send({ type: 'output', content }),
        });
        if (events.signal.aborted) return;
        if (outcome.kind === 'completed') {
          events.send({ type: 'done', session_id: accepted.session.sessionId, id: accepted.runId });
          return;
        }
        await runs.toResult(accepted, outcome); // throws the run's error, sent as the error frame
      });
    },
  );
}
