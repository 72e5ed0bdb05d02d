// POST /mcp: Berth as an MCP server over streamable HTTP, on the API listener, behind the API's own
// authentication and rate limit (its hooks run before this handler: no token, no MCP).
//
// The tools are @berth/mcp's (packages/mcp), the list `berth mcp` serves too, each tool a call of the SDK.
// Here the SDK's requests never leave the process: they are dispatched into this app as the caller's own requests (loopback-fetch.ts: the caller's Authorization header and client address), so every
// tool call meets the same authentication, ownership checks, validation, budgets and rate limit as the
// caller's direct API call would, and no tool can act as Berth or as another caller. Calling core services
// from here instead would put a second copy of each route's checks beside the routes.
//
// Stateless: each POST gets a server and a transport of its own, closed with its response; nothing is kept
// between requests, so there is no session to bound or expire. A client's cancellation of a tool call, which
// arrives in a POST of its own, is routed to the call it names (mcp-calls.ts). GET and DELETE (an SSE stream
// and a session's end, in the stateful variant) answer 405. At shutdown, the calls still answering get a few seconds to send
// their answer (their runs have been stopped by then: a tool error); the servers left are closed, which aborts
// their tool calls (and so their requests, as a client that left).
import { setTimeout as sleep } from 'node:timers/promises';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Berth } from '@berth/client';
import { berthMcpServer } from '@berth/mcp';
import { errors } from '../../errors.js';
import { callerOfRequest, loopbackFetch } from '../loopback-fetch.js';
import { McpCalls } from '../mcp-calls.js';
import { errorResponses, withExample } from '../schemas.js';

/** How long a stop lets tool calls still answering send their answer. */
const SHUTDOWN_GRACE_MS = 5_000;

/** The SDK's base URL inside the process: loopback-fetch.ts reads only the path and query of its requests. */
const IN_PROCESS_URL = 'http://berth.invalid';

const DESCRIPTION =
  'Berth\'s tools for MCP clients (Model Context Protocol, streamable HTTP transport, stateless): run a prompt (run_prompt; start_job and get_job), spawn an agent, send to it and read its output, list sessions and read their messages, list workspaces and their files, push and pull files. The body is one JSON-RPC 2.0 message of MCP; send `Accept: application/json, text/event-stream`. Every tool call acts as the caller of this request, with its token: it can reach only the caller\'s own sessions, jobs, agents and workspaces. See docs/mcp.md.';

/** One message: MCP's streamable HTTP carries no JSON-RPC batches since protocol version 2025-06-18. */
const JsonRpcMessage = withExample(
  Type.Object(
    {
      jsonrpc: Type.Literal('2.0', { description: 'Always "2.0".' }),
      id: Type.Optional(Type.Union([Type.String(), Type.Integer()], { description: 'A request\'s id, echoed by its answer; absent on a notification.' })),
      method: Type.Optional(Type.String({ description: 'initialize, notifications/initialized, tools/list, tools/call or ping' })),
      params: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'The method\'s parameters, e.g. {"name": "run_prompt", "arguments": {"prompt": "say: hi"}} for tools/call.' })),
    },
    { additionalProperties: true, description: 'One MCP JSON-RPC 2.0 request, notification or response.' },
  ),
  { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_prompt', arguments: { prompt: 'say: hi' } } },
);

const EXAMPLE_ANSWER = 'event: message\ndata: {"result":{"content":[{"type":"text","text":"{\\"run_id\\": \\"run-…\\", \\"session_id\\": \\"…\\", \\"output\\": \\"hi\\"}"}],"structuredContent":{"run_id":"run-…","session_id":"…","output":"hi"}},"jsonrpc":"2.0","id":2}\n\n';

export function registerMcpRoutes(app: FastifyInstance, deps: { version: string }): void {
  const answering = new Set<McpServer>();
  const calls = new McpCalls();
  app.addHook('preClose', async () => {
    // The listener closes after Berth's work has ended or been cut (composition/teardown.ts): a tool call whose
    // run was just stopped is answering with that error. It is let out; one still running after the grace is
    // closed (aborted, unanswered) so that the close does not wait for it.
    for (const deadline = Date.now() + SHUTDOWN_GRACE_MS; answering.size > 0 && Date.now() < deadline; ) await sleep(50);
    await Promise.all([...answering].map((server) => server.close().catch(() => undefined)));
  });

  app.post(
    '/mcp',
    {
      schema: {
        tags: ['mcp'],
        summary: 'Berth\'s MCP server (streamable HTTP): list and call Berth\'s tools as the caller',
        description: DESCRIPTION,
        body: JsonRpcMessage,
        response: {
          200: {
            description: 'The JSON-RPC answer, as one JSON object or as Server-Sent Events (`event: message`) carrying it.',
            content: { 'text/event-stream': { schema: Type.String(), example: EXAMPLE_ANSWER }, 'application/json': { schema: Type.Object({}, { additionalProperties: true }), example: JSON.parse(EXAMPLE_ANSWER.split('data: ')[1]!) } },
          },
          202: { description: 'A notification or response accepted (no body).', type: 'null' },
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request, reply) => {
      const berth = new Berth({ url: IN_PROCESS_URL, fetch: loopbackFetch(app, callerOfRequest(request.raw)), userAgent: `berth-mcp/${deps.version}` });
      const server = berthMcpServer(berth, { version: deps.version });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      answering.add(server);
      const authorization = request.headers.authorization;
      const release = calls.track(authorization, request.body, server);
      // The response's end (answered, or the client gone) ends the server; a tool call still running is aborted.
      reply.raw.once('close', () => {
        release();
        answering.delete(server);
        void server.close().catch(() => undefined);
      });
      await calls.cancel(authorization, request.body);
      reply.hijack();
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    },
  );

  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/mcp',
      schema: { hide: true },
      handler: async (_request, reply) => {
        void reply.header('allow', 'POST');
        throw errors.mcpMethodNotAllowed(method);
      },
    });
  }
}
