import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { register as globalRegistry } from 'prom-client';
import { startMetricsServer } from '../../src/http/metrics-server.js';
import { UNMATCHED_ROUTE, registerHttpMetrics } from '../../src/http/plugins/http-metrics.js';
import { createMetrics } from '../../src/metrics/metrics.js';

function get(port: number, path: string, method = 'GET'): Promise<{ status: number; type: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('createMetrics', () => {
  it('registers every metric on its own registry, not on the global one', async () => {
    const metrics = createMetrics();
    assert.notEqual(metrics.registry, globalRegistry);
    assert.equal((await globalRegistry.metrics()).includes('berth_'), false);
  });

  it('can be created twice in one process', () => {
    createMetrics();
    createMetrics();
  });

  it('names every metric with the berth_ prefix', async () => {
    const names = (await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
    assert.ok(names.length > 11);
    for (const name of names) assert.ok(name.startsWith('berth_'), name);
  });

  it('exports the metrics the issue lists, with their labels', async () => {
    const text = await createMetrics().registry.metrics();
    for (const name of [
      'berth_http_requests_total',
      'berth_http_request_duration_seconds',
      'berth_runs_total',
      'berth_run_duration_seconds',
      'berth_containers_running',
      'berth_jobs',
      'berth_agents',
      'berth_sse_subscribers',
      'berth_webhook_deliveries_total',
      'berth_auth_failures_total',
      'berth_rate_limited_total',
      'berth_process_cpu_seconds_total',
      'berth_egress_requests_total',
      'berth_gateway_requests_total',
      'berth_gateway_overhead_seconds',
      'berth_model_tokens_total',
    ]) {
      assert.ok(text.includes(`# TYPE ${name} `), name);
    }
    assert.ok(text.includes('berth_runs_total{mode="agent",outcome="oom"} 0'));
    assert.ok(text.includes('berth_webhook_deliveries_total{outcome="retried"} 0'));
    assert.ok(text.includes('berth_auth_failures_total{reason="token_blacklisted"} 0'));
    assert.ok(text.includes('berth_egress_requests_total{decision="refused_sni"} 0'));
    assert.ok(text.includes('berth_gateway_requests_total{outcome="refused_budget"} 0'));
    assert.ok(text.includes('berth_model_tokens_total{kind="cache_read"} 0'));
  });

  it('moves counters and gauges', async () => {
    const metrics = createMetrics();
    metrics.runs.labels('sync', 'completed').inc();
    metrics.runs.labels('sync', 'completed').inc();
    metrics.containersRunning.inc();
    metrics.jobs.labels('queued').set(3);
    metrics.runDuration.labels('sync').observe(12);
    const text = await metrics.registry.metrics();
    assert.ok(text.includes('berth_runs_total{mode="sync",outcome="completed"} 2'));
    assert.ok(text.includes('berth_containers_running 1'));
    assert.ok(text.includes('berth_jobs{status="queued"} 3'));
    assert.ok(text.includes('berth_run_duration_seconds_count{mode="sync"} 1'));
  });
});

describe('registerHttpMetrics', () => {
  it('records the route pattern, method and status, never the raw URL', async () => {
    const metrics = createMetrics();
    const app = Fastify();
    registerHttpMetrics(app, metrics);
    app.get('/jobs/:id', async () => ({ ok: true }));
    await app.inject({ url: '/jobs/job-1' });
    await app.inject({ url: '/jobs/job-2?x=1' });
    await app.inject({ url: '/random/path/123' });
    const text = await metrics.registry.metrics();
    assert.ok(text.includes('berth_http_requests_total{route="/jobs/:id",method="GET",status="200"} 2'), text);
    assert.ok(text.includes(`berth_http_requests_total{route="${UNMATCHED_ROUTE}",method="GET",status="404"} 1`));
    assert.ok(text.includes('berth_http_request_duration_seconds_count{route="/jobs/:id",method="GET"} 2'));
    assert.equal(text.includes('job-1'), false);
    assert.equal(text.includes('/random/path'), false);
  });
});

describe('startMetricsServer', () => {
  it('serves the metrics in Prometheus text format on its own port', async () => {
    const metrics = createMetrics();
    metrics.rateLimited.inc();
    const server = await startMetricsServer(metrics, { host: '127.0.0.1', port: 0 });
    try {
      assert.ok(server.port > 0);
      const response = await get(server.port, '/metrics');
      assert.equal(response.status, 200);
      assert.equal(response.type, metrics.registry.contentType);
      assert.match(response.type ?? '', /^text\/plain/);
      assert.ok(response.body.includes('berth_rate_limited_total 1'));
    } finally {
      await server.close();
    }
  });

  it('shows counters moving between scrapes', async () => {
    const metrics = createMetrics();
    const server = await startMetricsServer(metrics, { host: '127.0.0.1', port: 0 });
    try {
      assert.ok((await get(server.port, '/metrics')).body.includes('berth_webhook_deliveries_total{outcome="delivered"} 0'));
      metrics.webhookDeliveries.labels('delivered').inc();
      assert.ok((await get(server.port, '/metrics')).body.includes('berth_webhook_deliveries_total{outcome="delivered"} 1'));
    } finally {
      await server.close();
    }
  });

  it('accepts a query string on /metrics', async () => {
    const server = await startMetricsServer(createMetrics(), { host: '127.0.0.1', port: 0 });
    try {
      assert.equal((await get(server.port, '/metrics?name[]=x')).status, 200);
    } finally {
      await server.close();
    }
  });

  it('answers 404 for any other path or method', async () => {
    const server = await startMetricsServer(createMetrics(), { host: '127.0.0.1', port: 0 });
    try {
      assert.equal((await get(server.port, '/')).status, 404);
      assert.equal((await get(server.port, '/health')).status, 404);
      assert.equal((await get(server.port, '/metrics/x')).status, 404);
      assert.equal((await get(server.port, '/metrics', 'POST')).status, 404);
    } finally {
      await server.close();
    }
  });

  it('fails to start on a port that is taken', async () => {
    const first = await startMetricsServer(createMetrics(), { host: '127.0.0.1', port: 0 });
    try {
      await assert.rejects(startMetricsServer(createMetrics(), { host: '127.0.0.1', port: first.port }), /EADDRINUSE/);
    } finally {
      await first.close();
    }
  });

  it('stops accepting connections after close', async () => {
    const server = await startMetricsServer(createMetrics(), { host: '127.0.0.1', port: 0 });
    await server.close();
    await assert.rejects(get(server.port, '/metrics'));
  });
});
