// Any node, any request (issue 26): a request for an agent this process does not run, or for a job another
// node is running, is forwarded to the node that does (core/cluster/forwarding.ts decides where). It runs as
// an onRequest hook registered after authentication: the caller is authenticated here first, then the request
// goes out unchanged (its Authorization too, its body streamed as it arrives) and the owner authenticates
// it again; nothing this node says about the caller is believed there. The answer comes back as it is sent,
// SSE frame by frame; a client that leaves ends the upstream request. A forwarded request carries
// X-Berth-Forwarded-From and is never forwarded again: its receiver answers with what it has itself.
import { Agent as Dispatcher, request as sendUpstream } from 'undici';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Counter } from 'prom-client';
import { FORWARDED_FROM_HEADER, snapshotOfRecord, type ClusterForwarding, type Destination } from '../../core/cluster/forwarding.js';
import { errors } from '../../errors.js';
import { requestCaller } from '../caller.js';
import { relayFollowed, type SseOptions } from '../sse.js';

/** What became of a request this node forwarded (berth_forwarded_requests_total's outcome label). */
export type ForwardOutcome = 'forwarded' | 'unreachable' | 'answered_from_record' | 'node_unavailable';
export const FORWARD_OUTCOMES: readonly ForwardOutcome[] = ['forwarded', 'unreachable', 'answered_from_record', 'node_unavailable'];

export interface ForwardDependencies {
  readonly forwarding: ClusterForwarding;
  /** Whether this process runs the agent (then it answers without asking the database). */
  readonly runsAgent: (id: string) => boolean;
  readonly sse: SseOptions;
  /** berth_forwarded_requests_total{route,outcome}. */
  readonly forwarded: Counter<'route' | 'outcome'>;
  /** How long a forwarded request waits for the owner's answer to begin (a send waits for the engine). */
  readonly headersTimeoutMs?: number;
}

type Subject = 'agent' | 'job';

/** The routes whose subject may run on another node: `METHOD pattern` → what the :id names. */
const FORWARDED_ROUTES: ReadonlyMap<string, Subject> = new Map([
  ['GET /agents/:id', 'agent'],
  ['DELETE /agents/:id', 'agent'],
  ['POST /agents/:id/send', 'agent'],
  ['GET /agents/:id/stream', 'agent'],
  ['GET /jobs/:id/stream', 'job'],
  ['DELETE /jobs/:id', 'job'],
]);

/** Hop-by-hop headers (RFC 9110 7.6.1) and the ones the next hop sets itself: never relayed. */
const NOT_RELAYED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'proxy-authorization', 'proxy-authenticate']);

export function registerForwarding(app: FastifyInstance, deps: ForwardDependencies): void {
  // One connection pool to the other nodes; keep-alive connections are closed with the application.
  const dispatcher = new Dispatcher({ headersTimeout: deps.headersTimeoutMs ?? 300_000, bodyTimeout: 0, keepAliveTimeout: 10_000 });
  app.addHook('onClose', async () => dispatcher.close());

  app.addHook('onRequest', async (request, reply) => {
    const route = `${request.method === 'HEAD' ? 'GET' : request.method} ${request.routeOptions.url ?? ''}`;
    const subject = FORWARDED_ROUTES.get(route);
    if (subject === undefined) return;
    // Sent by a node already: answered here whatever this node's records say, so a request never goes round.
    if (request.headers[FORWARDED_FROM_HEADER] !== undefined) return;
    const { id } = request.params as { id: string };
    if (subject === 'agent' && deps.runsAgent(id)) return;
    const caller = requestCaller(request);
    const destination = subject === 'agent' ? await deps.forwarding.agent(id, caller) : await deps.forwarding.job(id, caller);
    if (destination.kind === 'here') return;
    const count = (outcome: ForwardOutcome) => deps.forwarded.labels(route, outcome).inc();
    if (destination.kind === 'record') return answerFromRecord(request, reply, deps, destination, count);
    return forward(request, reply, dispatcher, deps.forwarding.node, destination, count);
  });
}

async function forward(
  request: FastifyRequest,
  reply: FastifyReply,
  dispatcher: Dispatcher,
  self: string,
  owner: { readonly node: string; readonly url: string },
  count: (outcome: ForwardOutcome) => void,
): Promise<FastifyReply> {
  const controller = new AbortController();
  // The client left: the upstream request (an SSE stream, a send waiting for the engine) ends with it.
  const onClose = () => {
    if (!reply.raw.writableFinished) controller.abort();
  };
  reply.raw.once('close', onClose);
  const hasBody = request.headers['content-length'] !== undefined || request.headers['transfer-encoding'] !== undefined;
  try {
    const upstream = await sendUpstream(targetOf(owner.url, request.url), {
      method: request.method as 'GET',
      headers: relayedRequestHeaders(request, self),
      ...(hasBody ? { body: request.raw } : {}),
      signal: controller.signal,
      dispatcher,
    });
    count('forwarded');
    request.log.info({ node: owner.node, status: upstream.statusCode }, 'request forwarded to the node that runs it');
    reply.code(upstream.statusCode);
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (value !== undefined && !NOT_RELAYED.has(name) && name !== 'content-length') reply.header(name, value);
    }
    // Frame by frame: each chunk the owner writes is written to the client as it arrives. An upstream that
    // fails mid-way cuts the client's connection (an SSE client reconnects with Last-Event-ID).
    upstream.body.on('error', (error) => {
      if (controller.signal.aborted) request.log.debug({ node: owner.node }, 'the client of a forwarded answer left');
      else request.log.warn({ err: error, node: owner.node }, 'a forwarded answer was cut');
    });
    return reply.send(upstream.body);
  } catch (error) {
    reply.raw.off('close', onClose);
    count('unreachable');
    const reason = controller.signal.aborted ? 'the client left' : (error as Error).message;
    request.log.warn({ err: error, node: owner.node, url: owner.url }, 'a request could not be forwarded to the node that runs it');
    throw errors.nodeUnreachable(owner.node, reason);
  }
}

/** The owner's URL for this request: its SERVICE_NODE_URL (a path prefix kept) followed by the matched route's path and query. */
function targetOf(nodeUrl: string, path: string): URL {
  const base = new URL(nodeUrl);
  return new URL(`${base.pathname.replace(/\/+$/, '')}${path}`, base);
}

function relayedRequestHeaders(request: FastifyRequest, self: string): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined && !NOT_RELAYED.has(name) && name !== FORWARDED_FROM_HEADER) headers[name] = value;
  }
  headers[FORWARDED_FROM_HEADER] = self;
  // The client as this node's peer saw it: the owner's rate limit believes it when this node is among its
  // SERVICE_RATE_LIMIT_TRUSTED_PROXIES, and counts this node's address otherwise.
  const peer = request.socket.remoteAddress;
  if (peer) {
    const before = request.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = before ? `${Array.isArray(before) ? before.join(', ') : before}, ${peer}` : peer;
  }
  return headers;
}

/**
 * An agent whose node holds no live lease: what its record says. An exited agent (its node stopped it, or its
 * loss was handled: `node_lost`) is read, streamed (its exit, then closed), refused a turn (410) and
 * forgotten at DELETE as on its node; a live one cannot be reached (503 naming its node).
 */
async function answerFromRecord(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: ForwardDependencies,
  destination: Extract<Destination, { kind: 'record' }>,
  count: (outcome: ForwardOutcome) => void,
): Promise<FastifyReply> {
  const { agent } = destination;
  const route = request.routeOptions.url;
  if (agent.status !== 'exited') {
    count('node_unavailable');
    throw errors.nodeUnavailable(`agent ${agent.id}`, agent.nodeName);
  }
  count('answered_from_record');
  const exitError = agent.exitError ?? 'agent: the engine exited';
  if (route === '/agents/:id/send') throw errors.agentExited(agent.id, exitError);
  if (request.method === 'DELETE') {
    if (!(await deps.forwarding.forgetExited(agent.id, requestCaller(request)))) throw errors.agentNotFound(agent.id);
    return reply.code(204).send();
  }
  if (route === '/agents/:id/stream') {
    const at = agent.lastActivityAt;
    const events = (async function* () {
      yield { type: 'exited', content: exitError, at };
      yield { type: 'closed', at: new Date().toISOString() };
    })();
    await relayFollowed(reply, deps.sse, { events, close: () => undefined }, { waitForDrain: false });
    return reply;
  }
  return reply.code(200).send(snapshotOfRecord(agent));
}
