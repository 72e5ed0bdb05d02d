// Records every API response in berth_http_requests_total and berth_http_request_duration_seconds.
// The route label is the route pattern (`/jobs/:id`), never the raw URL, so label cardinality stays
// bounded no matter what callers send; requests that match no route share one label value.
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../metrics/metrics.js';

export const UNMATCHED_ROUTE = '(unmatched)';

export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
    const method = request.method;
    metrics.httpRequests.labels(route, method, String(reply.statusCode)).inc();
    metrics.httpDuration.labels(route, method).observe(reply.elapsedTime / 1000);
  });
}
