// GET /sessions, GET /sessions/:id/messages, GET /sessions/:id/messages/:message_id, DELETE /sessions/:id.
import { requestCaller } from '../caller.js';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SessionService } from '../../core/sessions/session-service.js';
import { errorResponses } from '../schemas.js';

const SessionParamsSchema = Type.Object({
  id: Type.String({ description: 'Session id (a UUID; anything else is a 400)' }),
});

const MessageParamsSchema = Type.Object({
  id: Type.String({ description: 'Session id (a UUID)' }),
  message_id: Type.String({ description: 'Message id: the engine\'s record uuid, as listed in `id`' }),
});

const PagingQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 0, default: 50, description: 'Page size; default 50, larger values are clamped to SERVICE_SESSIONS_MAX_PAGE_SIZE' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'Messages skipped' })),
});

const SessionSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String({ description: 'Set from the first prompt by the session title hook; empty when none' }),
});

const MessageSchema = Type.Object({
  id: Type.String({ description: 'The engine\'s record uuid' }),
  role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
  content: Type.String({ description: 'Text; tool calls as `[tool call <name>] <input JSON>`, results as `[tool result] <text>` or `[tool error] <text>`' }),
});

const MessagePageSchema = Type.Object({
  messages: Type.Array(MessageSchema),
  total: Type.Integer({ description: 'Number of messages in the session' }),
  limit: Type.Integer({ description: 'Page size applied (after clamping)' }),
  offset: Type.Integer(),
  has_more: Type.Boolean({ description: 'Whether messages follow this page (offset + limit < total)' }),
});

export function registerSessionRoutes(app: FastifyInstance, deps: { sessions: SessionService }): void {
  app.get(
    '/sessions',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Sessions, most recently active first',
        response: { 200: Type.Object({ sessions: Type.Array(SessionSchema) }), ...errorResponses(401, 429) },
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
        response: { 200: MessagePageSchema, ...errorResponses(400, 401, 404, 429) },
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
        response: { 200: MessageSchema, ...errorResponses(400, 401, 404, 429) },
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
          200: Type.Object({ success: Type.Literal(true), session_id: Type.String({ format: 'uuid' }) }),
          ...errorResponses(400, 401, 404, 409, 429),
        },
      },
    },
    async (request) => deps.sessions.delete(request.params.id, requestCaller(request)),
  );
}
