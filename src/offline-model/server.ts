// The offline model's HTTP server: routes, the optional API key, request bodies, and the lifecycle
// that lets tests close it without waiting on open keep-alive connections or pending delays.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { BlockList } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createHash, timingSafeEqual } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { countInputTokens, parseMessagesRequest, respond, type ParsedRequest } from './responder.js';
import { writeError, writeJson, writeStream } from './sse.js';

export interface OfflineModelOptions {
  readonly host?: string;
  readonly port?: number;
  /** When set, every /v1 request must carry it as `x-api-key` or `Authorization: Bearer`. */
  readonly apiKey?: string;
  readonly log?: (msg: string) => void;
  /**
   * When set, connections from any other address are closed before a byte is read. Containers reach the
   * host through their network's gateway, which exists only while a container runs on it, so the server
   * cannot bind to it; it listens on all interfaces and admits the agent network's subnets only.
   */
  readonly allowedClients?: BlockList;
}

export interface OfflineModel {
  /** http://host:port as bound, so port 0 shows the port actually chosen. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Engine requests carry the whole conversation; this is far above any real one. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
  ) {
    super(message);
  }
}

export async function startOfflineModel(options: OfflineModelOptions = {}): Promise<OfflineModel> {
  const host = options.host ?? '127.0.0.1';
  const log = options.log ?? (() => {});
  const inFlight = new Set<AbortController>();

  const server = createServer((request, response) => {
    // Aborting on close stops pending sleeps and slow streams when the engine hangs up or we shut down.
    const controller = new AbortController();
    inFlight.add(controller);
    response.on('close', () => {
      controller.abort();
      inFlight.delete(controller);
    });
    handle(request, response, options.apiKey, controller.signal, log).catch((error: unknown) => {
      const failure = error instanceof HttpFailure ? error : new HttpFailure(500, 'api_error', String(error));
      if (controller.signal.aborted) return;
      if (!response.headersSent) writeError(response, failure.status, failure.errorType, failure.message);
      else response.destroy();
      log(`${request.method} ${request.url} -> ${failure.status} ${failure.message}`);
    });
  });

  // The engine reuses kept-alive connections between its requests of one turn. Node closes idle ones after
  // 5 s by default; on a loaded machine the engine's next request can cross that close and fail with
  // ECONNRESET (seen once in ~150 runs under a busy swap loop), and the offline model runs with no retries.
  // Idle connections are kept longer than any pause between two requests of a turn.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;

  const { allowedClients } = options;
  if (allowedClients) {
    server.on('connection', (socket) => {
      const address = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
      const family = address.includes(':') ? 'ipv6' : 'ipv4';
      if (!allowedClients.check(address, family)) socket.destroy();
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const controller of inFlight) controller.abort();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function handle(
  request: IncomingMessage,
  response: ServerResponse,
  apiKey: string | undefined,
  signal: AbortSignal,
  log: (msg: string) => void,
): Promise<void> {
  const path = new URL(request.url ?? '/', 'http://offline-model').pathname;
  const route = `${request.method} ${path}`;
  if (route === 'GET /health') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ status: 'ok' }));
    return;
  }
  if (route !== 'POST /v1/messages' && route !== 'POST /v1/messages/count_tokens') {
    throw new HttpFailure(404, 'not_found_error', `no route for ${route}`);
  }
  if (apiKey !== undefined && !carriesKey(request, apiKey)) {
    throw new HttpFailure(401, 'authentication_error', 'invalid x-api-key');
  }
  // Logged on arrival too: a request that never gets its answer is then still seen.
  log(`${route} from ${request.socket.remoteAddress ?? '?'}:${request.socket.remotePort ?? '?'}`);
  const parsed = parseBody(await readBody(request));
  if (!parsed.ok) throw new HttpFailure(400, 'invalid_request_error', parsed.message);

  if (path === '/v1/messages/count_tokens') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ input_tokens: countInputTokens(parsed.request.messages) }));
    return;
  }

  const reply = respond(parsed.request);
  if (reply.sleepMs > 0) await delay(reply.sleepMs, undefined, { signal });
  if (reply.kind === 'error') {
    writeError(response, reply.status, reply.errorType, reply.message);
    log(`${route} -> ${reply.status} ${reply.errorType}`);
    return;
  }
  await (parsed.request.stream ? writeStream : writeJson)(response, reply, signal);
  const summary = reply.content.map((block) => (block.type === 'text' ? 'text' : `tool_use ${block.name}`)).join(', ');
  log(`${route} -> 200 ${reply.stopReason} (${summary})`);
}

function carriesKey(request: IncomingMessage, apiKey: string): boolean {
  const header = request.headers['x-api-key'];
  const bearer = /^Bearer\s+(.+)$/i.exec(request.headers.authorization ?? '')?.[1];
  const offered = typeof header === 'string' ? header : bearer;
  return offered !== undefined && sameSecret(offered, apiKey);
}

/** Compares digests so neither the length nor the content of the key leaks through timing. */
function sameSecret(offered: string, expected: string): boolean {
  const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(offered), digest(expected));
}

function parseBody(body: string): ParsedRequest {
  try {
    return parseMessagesRequest(JSON.parse(body));
  } catch {
    return { ok: false, message: 'body is not valid JSON' };
  }
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpFailure(413, 'request_too_large', `request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
