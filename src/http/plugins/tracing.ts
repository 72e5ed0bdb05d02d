// A trace span per HTTP request: method, route pattern, status and the caller's `sub`. Never the URL's
// query (a stream's prompt travels there) nor any header. The span is the active context for the rest of
// the request, so the run a request starts is its child. A no-op while tracing is off.
import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';

const tracer = trace.getTracer('berth');

export function registerRequestTracing(app: FastifyInstance): void {
  const spans = new WeakMap<object, Span>();
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const span = tracer.startSpan(`${request.method} ${route}`, {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': request.method, 'http.route': route },
    });
    spans.set(request, span);
    // Hijacked replies (event streams) end without onResponse: the socket's close ends their span.
    reply.raw.once('close', () => {
      span.setAttribute('http.response.status_code', reply.raw.statusCode);
      if (request.auth) span.setAttribute('enduser.id', request.auth.sub);
      if (reply.raw.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(context.active(), span), done);
  });
}
