// A fetch whose requests are dispatched into this Fastify app in-process (light-my-request, what
// app.inject uses), each as if the caller of one incoming HTTP request had sent it: with that request's
// Authorization header verbatim, and from its client address (with its X-Forwarded-For, judged by the same
// trusted proxies). So a request sent through it meets every gate a request of the caller meets (the
// authentication hook, ownership in the route, validation, budgets and the per-address rate limit) and can
// do nothing the caller could not do; it never carries an identity of Berth's own.
//
// Bodies stream both ways (an event stream is read as it is written). Aborting the request closes its
// response as a disconnecting client's socket would: the route sees the client leave (a run is stopped,
// an event subscription left).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import inject from 'light-my-request';

/** Who a loopback request is sent as: the incoming request's credentials and address. */
export interface LoopbackCaller {
  readonly authorization: string | undefined;
  readonly forwardedFor: string | string[] | undefined;
  readonly remoteAddress: string | undefined;
}

export function callerOfRequest(request: IncomingMessage): LoopbackCaller {
  return {
    authorization: request.headers.authorization,
    forwardedFor: request.headers['x-forwarded-for'],
    remoteAddress: request.socket.remoteAddress,
  };
}

/** Headers of the incoming request that decide who the caller is; they are never taken from the client's request. */
const CALLER_HEADERS = ['authorization', 'x-forwarded-for', 'host', 'cookie'];

export function loopbackFetch(app: FastifyInstance, caller: LoopbackCaller): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    // The caller's own signal: a copied Request's signal follows it only through a weak reference (undici),
    // which an abort may not reach once nothing else holds the copy's controller.
    const signal = init?.signal ?? (input instanceof Request ? input.signal : request.signal);
    signal.throwIfAborted();
    const url = new URL(request.url);
    const headers: IncomingHttpHeaders = {};
    request.headers.forEach((value, name) => {
      if (!CALLER_HEADERS.includes(name)) headers[name] = value;
    });
    if (caller.authorization !== undefined) headers.authorization = caller.authorization;
    if (caller.forwardedFor !== undefined) headers['x-forwarded-for'] = caller.forwardedFor;
    const payload = request.body === null ? undefined : Buffer.from(await request.arrayBuffer());

    let response: ServerResponse | undefined;
    const disconnect = () => response?.destroy();
    signal.addEventListener('abort', disconnect, { once: true });
    const answered = await inject(
      (req, res) => {
        response = res;
        if (signal.aborted) res.destroy();
        app.routing(req, res);
      },
      {
        method: request.method as 'GET',
        url: `${url.pathname}${url.search}`,
        headers,
        ...(payload === undefined ? {} : { payload }),
        ...(caller.remoteAddress === undefined ? {} : { remoteAddress: caller.remoteAddress }),
        payloadAsStream: true,
      },
    ).catch((error: unknown) => {
      signal.removeEventListener('abort', disconnect);
      throw signal.aborted ? signal.reason : error;
    });
    const stream = answered.stream();
    stream.once('close', () => {
      signal.removeEventListener('abort', disconnect);
      // A body left unread (the reader cancelled it) is a client that left: the route stops writing.
      if (!stream.readableEnded) response?.destroy();
    });
    const answerHeaders = new Headers();
    for (const [name, value] of Object.entries(answered.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) answerHeaders.append(name, String(item));
    }
    const bodyless = request.method === 'HEAD' || answered.statusCode === 204 || answered.statusCode === 304;
    if (bodyless) stream.destroy();
    return new Response(bodyless ? null : (Readable.toWeb(stream) as ReadableStream<Uint8Array>), {
      status: answered.statusCode,
      statusText: answered.statusMessage,
      headers: answerHeaders,
    });
  };
}
