// The model gateway's request path: an engine's Messages API request, authenticated by its per-run
// credential, checked against the budgets, forwarded to the real model API with the real credential (which
// never enters a container), and answered as the upstream answers, byte for byte as it arrives (a streamed
// answer is never held back). The usage is read from a copy of the answer and recorded once it ended, so no
// store write sits between the engine and its first byte.
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { performance } from 'node:perf_hooks';
import { MODEL_GRANT_KINDS, type BudgetCheck, type BudgetLimit, type GrantHolder, type GrantLookup, type TokenCounts, type UpstreamModel, type UsageRecorder } from '../core/gateway/gateway-types.js';
import { estimateCostUsd } from '../engine/pricing.js';
import type { Metrics } from '../metrics/metrics.js';
import { UsageTap } from './usage-tap.js';
import { NO_TOKENS } from '../store/usage/usage-store.js';

export interface ModelForwardOptions {
  readonly upstream: UpstreamModel;
  readonly grants: GrantLookup;
  readonly budgets: BudgetCheck;
  readonly usage: UsageRecorder;
  readonly onBudgetRefusal: (runId: string, message: string) => void;
  readonly metrics: Pick<Metrics, 'gatewayRequests' | 'gatewayOverhead' | 'modelTokens'>;
  readonly log: (details: Record<string, unknown>, message: string) => void;
}

export interface ModelForwarder {
  handle(request: IncomingMessage, response: ServerResponse): void;
  /** Closes the kept-alive upstream connections. */
  close(): void;
}

/** Engine requests carry the whole conversation; far above any real one (the offline model's limit too). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** A non-streaming request body is read to name its model in a refusal's record; larger ones are just drained. */
const MAX_REFUSED_BODY_BYTES = 8 * 1024 * 1024;
/** The status recorded when the engine hung up before the answer began (nginx's "client closed request"). */
const CLIENT_CLOSED = 499;
const OAUTH_BETA = 'oauth-2025-04-20';

/** RFC 9110 §7.6.1 connection-specific fields, plus the proxy ones: never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

export const INVALID_CREDENTIAL = 'Berth gateway: this credential is not valid: the run it belonged to has ended';
export const BUDGETS_UNAVAILABLE = 'Berth gateway: this run\'s model budgets could not be read from the usage store; try again';
export const PROXY_ONLY_CREDENTIAL = 'Berth gateway: this credential is for the egress proxy only (a compose service\'s or a git clone\'s): it cannot call the model';

/** An error answer in the Messages API's shape, which the engine shows as it is. */
export function writeApiError(response: ServerResponse, status: number, type: string, message: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  const body = JSON.stringify({ type: 'error', error: { type, message } });
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

/** Header fields of one hop, without the connection-specific ones (and those the Connection field names). */
export function endToEndHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim()));
  const kept: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) kept[name] = value;
  }
  return kept;
}

/** The per-run credential an engine sends: ANTHROPIC_API_KEY as x-api-key, or a bearer token. */
export function tokenOf(headers: IncomingHttpHeaders): string | undefined {
  const key = headers['x-api-key'];
  if (typeof key === 'string' && key !== '') return key;
  return /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '')?.[1];
}

/** The request headers the upstream gets: the engine's own, with the real credential in place of the run's. */
export function upstreamHeaders(headers: IncomingHttpHeaders, credential: UpstreamModel['credential'], bodyLength: number): OutgoingHttpHeaders {
  const out = endToEndHeaders(headers);
  delete out['x-api-key'];
  delete out['authorization'];
  delete out['host'];
  // Identity encoding: the usage tap reads the answer's bytes, and a compressed stream would hide it.
  out['accept-encoding'] = 'identity';
  out['content-length'] = bodyLength;
  if (credential.kind === 'api_key') {
    out['x-api-key'] = credential.value;
  } else {
    out['authorization'] = `Bearer ${credential.value}`;
    const betas = String(out['anthropic-beta'] ?? '').split(',').map((beta) => beta.trim()).filter((beta) => beta !== '');
    if (!betas.includes(OAUTH_BETA)) betas.push(OAUTH_BETA);
    out['anthropic-beta'] = betas.join(',');
  }
  return out;
}

/** The session and agent a record names, when the holder has them. */
export function holderIds(holder: GrantHolder): { sessionId?: string; agentId?: string } {
  return {
    ...(holder.sessionId === undefined ? {} : { sessionId: holder.sessionId }),
    ...(holder.agentId === undefined ? {} : { agentId: holder.agentId }),
  };
}

/** Reads a request body whole, up to `limit` bytes; undefined when it is longer (the rest is drained). */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    request.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length <= limit) chunks.push(chunk);
    });
    request.on('end', () => resolve(length <= limit ? Buffer.concat(chunks, length) : undefined));
    request.on('error', reject);
    request.on('close', () => {
      if (!request.complete) reject(new Error('the client hung up before its request ended'));
    });
  });
}

function modelOfBody(body: Buffer | undefined): string {
  if (body === undefined || body.length > MAX_REFUSED_BODY_BYTES) return '';
  try {
    const model = (JSON.parse(body.toString('utf8')) as { model?: unknown }).model;
    return typeof model === 'string' ? model : '';
  } catch {
    return '';
  }
}

export function modelForwarder(options: ModelForwardOptions): ModelForwarder {
  const { upstream, metrics, log } = options;
  const base = new URL(upstream.baseUrl);
  const secure = base.protocol === 'https:';
  const send = secure ? httpsRequest : httpRequest;
  // Kept-alive connections to the upstream: a new TCP (and TLS) handshake per request would cost more than the
  // whole overhead budget. LIFO reuses the warmest socket and lets the others time out.
  const agent = secure ? new HttpsAgent({ keepAlive: true, scheduling: 'lifo' }) : new HttpAgent({ keepAlive: true, scheduling: 'lifo' });
  const basePath = base.pathname.replace(/\/+$/, '');

  function record(holder: GrantHolder, at: number, fields: { model: string; tokens: TokenCounts; status: number; overheadMs?: number; refusal?: { limit: BudgetLimit; message: string } }): void {
    const costUsd = fields.refusal ? 0 : estimateCostUsd({ ...fields.tokens }, fields.model);
    // Not awaited: the answer is already on its way. A failing store must not turn an answered request into a
    // crash; the run's usage is then short by one.
    options.usage.recordRequest({
      at, caller: holder.caller, runId: holder.runId, ...holderIds(holder),
      model: fields.model, tokens: fields.tokens, costUsd, status: fields.status,
      ...(fields.overheadMs === undefined ? {} : { overheadMs: fields.overheadMs }),
      ...(fields.refusal === undefined ? {} : { refusal: fields.refusal }),
    }).catch((error: unknown) => log({ runId: holder.runId, err: error }, 'gateway: recording a model request failed'));
    const { tokens } = fields;
    if (tokens.input_tokens) metrics.modelTokens.inc({ kind: 'input' }, tokens.input_tokens);
    if (tokens.output_tokens) metrics.modelTokens.inc({ kind: 'output' }, tokens.output_tokens);
    if (tokens.cache_creation_input_tokens) metrics.modelTokens.inc({ kind: 'cache_creation' }, tokens.cache_creation_input_tokens);
    if (tokens.cache_read_input_tokens) metrics.modelTokens.inc({ kind: 'cache_read' }, tokens.cache_read_input_tokens);
  }

  async function refuseBudget(request: IncomingMessage, response: ServerResponse, holder: GrantHolder, at: number, limit: BudgetLimit, message: string): Promise<void> {
    metrics.gatewayRequests.inc({ outcome: 'refused_budget' });
    // 403, not 429: the engine retries a 429 and would only spend its turn waiting.
    writeApiError(response, 403, 'permission_error', `Berth: model budget reached: ${message}`);
    options.onBudgetRefusal(holder.runId, message);
    log({ runId: holder.runId, caller: holder.caller, limit }, `gateway: model request refused: ${message}`);
    const body = await readBody(request, MAX_REFUSED_BODY_BYTES).catch(() => undefined);
    record(holder, at, { model: modelOfBody(body), tokens: NO_TOKENS, status: 403, refusal: { limit, message } });
  }

  /**
   * `checkMs`: the gateway's time before it read the body (credential, budget). The overhead recorded adds the
   * time from the body's end to the request's departure and from the upstream's first byte to the engine's;
   * the transfer of the body itself is not counted: a direct connection spends it too.
   */
  function forward(request: IncomingMessage, response: ServerResponse, holder: GrantHolder, at: number, checkMs: number, body: Buffer): void {
    const bodyAt = performance.now();
    const headers = upstreamHeaders(request.headers, upstream.credential, body.length);
    const path = basePath + (request.url ?? '/');
    const counted = new URL(request.url ?? '/', 'http://gateway').pathname === '/v1/messages';
    let upstreamRequest: ClientRequest | undefined;
    let upstreamAnswer: IncomingMessage | undefined;
    let hungUp = false;
    let recorded = false;
    let tap: UsageTap | undefined;
    let status = CLIENT_CLOSED;
    let overheadMs: number | undefined;

    const finish = (): void => {
      if (recorded || !counted) return;
      recorded = true;
      const seen = tap?.result();
      record(holder, at, { model: seen?.model ?? '', tokens: seen?.tokens ?? NO_TOKENS, status, ...(overheadMs === undefined ? {} : { overheadMs }) });
    };

    // The engine hung up (or the answer ended): stop the upstream too, then record what was seen.
    response.on('close', () => {
      hungUp = !response.writableFinished;
      if (!upstreamAnswer?.complete) upstreamRequest?.destroy();
      finish();
    });

    const attempt = (retry: boolean): void => {
      const outgoing = send({ protocol: base.protocol, hostname: base.hostname, port: base.port, method: request.method, path, headers, agent });
      upstreamRequest = outgoing;
      outgoing.on('socket', (socket) => socket.setNoDelay(true));
      outgoing.on('response', (answer) => {
        upstreamAnswer = answer;
        const firstByteAt = performance.now();
        status = answer.statusCode ?? 502;
        tap = new UsageTap(answer.headers['content-type']);
        response.writeHead(status, answer.statusMessage, endToEndHeaders(answer.headers));
        // Headers go out at once: for a stream they are the engine's first byte.
        response.flushHeaders();
        overheadMs = checkMs + (sentAt - bodyAt) + (performance.now() - firstByteAt);
        metrics.gatewayOverhead.observe(overheadMs / 1000);
        metrics.gatewayRequests.inc({ outcome: 'forwarded' });
        answer.pipe(response);
        const copy = tap;
        answer.on('data', (chunk: Buffer) => copy.feed(chunk));
        answer.on('error', () => response.destroy());
        // An upstream that ends its answer early leaves the engine with a truncated one, as a direct connection would.
        answer.on('aborted', () => response.destroy());
      });
      outgoing.on('error', (error: NodeJS.ErrnoException) => {
        if (upstreamAnswer !== undefined || hungUp) return;
        // A kept-alive connection the upstream closed just as it was reused: the request never reached it.
        if (retry && outgoing.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) {
          attempt(false);
          return;
        }
        status = 502;
        metrics.gatewayRequests.inc({ outcome: 'upstream_error' });
        log({ runId: holder.runId, code: error.code, err: error.message }, `gateway: the model API at ${base.origin} failed`);
        writeApiError(response, 502, 'api_error', `Berth gateway: the model API (${base.origin}) could not be reached: ${error.code ?? error.message}`);
      });
      outgoing.end(body);
      const sentAt = performance.now();
    };
    attempt(true);
  }

  function readAndForward(request: IncomingMessage, response: ServerResponse, holder: GrantHolder, at: number, checkMs: number): void {
    readBody(request, MAX_BODY_BYTES).then(
      (body) => {
        if (body === undefined) {
          writeApiError(response, 413, 'request_too_large', `Berth gateway: request bodies are limited to ${MAX_BODY_BYTES} bytes`);
          return;
        }
        if (!response.destroyed) forward(request, response, holder, at, checkMs, body);
      },
      () => response.destroy(),
    );
  }

  return {
    handle(request, response) {
      const receivedAt = performance.now();
      const at = Date.now();
      const token = tokenOf(request.headers);
      const grant = token === undefined ? undefined : options.grants.lookup(token);
      if (grant?.state !== 'bound') {
        metrics.gatewayRequests.inc({ outcome: 'refused_credential' });
        log({ runId: grant?.runId, url: request.url, remote: request.socket.remoteAddress }, `gateway: model request refused: ${grant ? 'credential not bound to a run yet' : token === undefined ? 'no credential' : 'unknown credential'}`);
        request.resume();
        writeApiError(response, 401, 'authentication_error', INVALID_CREDENTIAL);
        return;
      }
      const holder = grant.holder;
      if (!MODEL_GRANT_KINDS.includes(holder.kind)) {
        // A stack service's or a git clone's credential: its container has no business with the model.
        metrics.gatewayRequests.inc({ outcome: 'refused_credential' });
        log({ runId: holder.runId, kind: holder.kind, url: request.url }, 'gateway: model request refused: the credential is for the egress proxy only');
        request.resume();
        writeApiError(response, 403, 'permission_error', PROXY_ONLY_CREDENTIAL);
        return;
      }
      // Answered from memory unless the run's or the caller's total is not loaded yet (usage store read once).
      options.budgets.check(holder, at).then(
        (decision) => {
          if (!decision.ok) {
            void refuseBudget(request, response, holder, at, decision.limit, decision.message);
            return;
          }
          readAndForward(request, response, holder, at, performance.now() - receivedAt);
        },
        (error: unknown) => {
          // Unknown totals are no permission: the request is refused, the engine may retry it.
          metrics.gatewayRequests.inc({ outcome: 'budget_unavailable' });
          log({ runId: holder.runId, err: error }, 'gateway: model request refused: its budgets could not be read from the usage store');
          request.resume();
          writeApiError(response, 503, 'api_error', BUDGETS_UNAVAILABLE);
        },
      );
    },
    close() {
      agent.destroy();
    },
  };
}
