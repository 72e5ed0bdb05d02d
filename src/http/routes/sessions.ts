// GET /sessions, GET /sessions/:id/messages, GET /sessions/:id/messages/:message_id, DELETE /sessions/:id.
import { requestCaller } from '../caller.js';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SessionService } from '../../core/sessions/session-service.js';
import { errors } from '../../errors.js';
import { errorResponses, EXAMPLE_SESSION_ID, withExample } from '../schemas.js';

const SESSION_ID = 'Session id (a UUID). Any other value names no session: 404, and no file is looked at.';

const SessionParamsSchema = Type.Object({
  id: Type.String({ description: SESSION_ID }),
});

const MessageParamsSchema = Type.Object({
  id: Type.String({ description: SESSION_ID }),
  message_id: Type.String({ description: 'Message id: the engine\'s record uuid, as listed in `id`' }),
});

const EXAMPLE_MESSAGES = [
  { id: '7b1d0c52-4f0e-4a8e-9a43-5c1e9f2d6b10', role: 'user', content: 'say: hello' },
  { id: 'c2e6a3f1-8d4b-4b7a-b0f5-1a9e3d7c5f22', role: 'assistant', content: 'hello' },
] as const;

// Texts answered for an unknown session or message; `<id>` is the id as given.
const sessionNotFound = errors.sessionNotFound('<id>');
const messageNotFound = errors.notFound('message <message_id> of session <id>');

const PagingQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 0, default: 50, description: 'Page size; default 50, larger values are clamped to SERVICE_SESSIONS_MAX_PAGE_SIZE' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Messages skipped' })),
});

const SessionSchema = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Session id' }),
  title: Type.String({ description: 'Derived from the session\'s first prompt (its first line with text, at most 60 characters); empty when none' }),
  stack: Type.Optional(
    Type.Object(
      {
        services: Type.Array(Type.String(), { description: 'The stack\'s services besides the agent service (whose container exists only during a run)' }),
        in_use: Type.Boolean({ description: 'Whether a run of the session is using the stack now' }),
        last_used_at: Type.String({ format: 'date-time', description: 'When a run last used it; the stack is removed SERVICE_COMPOSE_STACK_TTL later' }),
      },
      { description: 'Present while the session has a live compose stack (container.environment)' },
    ),
  ),
});

const MessageSchema = Type.Object({
  id: Type.String({ description: 'The engine\'s record uuid' }),
  role: Type.Union([Type.Literal('user'), Type.Literal('assistant')], { description: 'user or assistant' }),
  content: Type.String({ description: 'Text; tool calls as `[tool call <name>] <input JSON>`, results as `[tool result] <text>` or `[tool error] <text>`' }),
});

const MessagePageSchema = Type.Object({
  messages: Type.Array(MessageSchema),
  total: Type.Integer({ description: 'Number of messages in the session' }),
  limit: Type.Integer({ description: 'Page size applied (after clamping)' }),
  offset: Type.Integer({ description: 'Messages skipped' }),
  has_more: Type.Boolean({ description: 'Whether messages follow this page (offset + limit < total)' }),
});

export function registerSessionRoutes(app: FastifyInstance, deps: { sessions: SessionService }): void {
  app.get(
    '/sessions',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Sessions, most recently active first',
        response: {
          200: withExample(Type.Object({ sessions: Type.Array(SessionSchema) }), { sessions: [{ id: EXAMPLE_SESSION_ID, title: 'say: hello' }] }),
          ...errorResponses(401, 429),
        },
      },
    },
    async (request) => ({ sessions: await deps.sessions.list(requestCaller(request)) }),
  );

  app.get<{ Params: Static<typeof SessionParamsSchema>; Querystring: Static<typeof PagingQuerySchema> }>(
    '/sessions/:id/messages',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Messages of a session in conversation order, paged',
        params: SessionParamsSchema,
        querystring: PagingQuerySchema,
        response: {
          200: withExample(MessagePageSchema, { messages: EXAMPLE_MESSAGES, total: 2, limit: 50, offset: 0, has_more: false }),
          ...errorResponses(400, 401, sessionNotFound, 429),
        },
      },
    },
    async (request) => deps.sessions.messages(request.params.id, request.query, requestCaller(request)),
  );

  app.get<{ Params: Static<typeof MessageParamsSchema> }>(
    '/sessions/:id/messages/:message_id',
    {
      schema: {
        tags: ['sessions'],
        summary: 'One message of a session',
        params: MessageParamsSchema,
        response: { 200: withExample(MessageSchema, EXAMPLE_MESSAGES[1]), ...errorResponses(401, sessionNotFound, messageNotFound, 429) },
      },
    },
    async (request) => deps.sessions.message(request.params.id, request.params.message_id, requestCaller(request)),
  );

  app.delete<{ Params: Static<typeof SessionParamsSchema> }>(
    '/sessions/:id',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Delete a session and its files (409 while a run or agent uses it)',
        params: SessionParamsSchema,
        response: {
          200: withExample(
            Type.Object({ success: Type.Literal(true), session_id: Type.String({ format: 'uuid', description: 'The deleted session' }) }),
            { success: true, session_id: EXAMPLE_SESSION_ID },
          ),
          ...errorResponses(401, sessionNotFound, errors.sessionBusy('<id>'), 429),
        },
      },
    },
    async (request) => deps.sessions.delete(request.params.id, requestCaller(request)),
  );
}
