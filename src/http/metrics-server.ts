// The metrics listener: GET /metrics in the Prometheus text format, on its own address
// (SERVICE_METRICS_ADDRESS, 127.0.0.1:9090 by default) and never on the API port, so scrapers need no
// API credentials and the API exposes nothing about the host. Everything else is 404.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '../metrics/metrics.js';

export interface MetricsServer {
  /** The bound port (useful when 0 was asked for). */
  readonly port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(metrics: Metrics, address: { host: string; port: number }): Promise<MetricsServer> {
  const server = createServer((request, response) => {
    void answer(metrics, request, response);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Scrapers keep connections alive; do not let them hold the shutdown.
        server.closeAllConnections();
      }),
  };
}

async function answer(metrics: Metrics, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const path = (request.url ?? '').split('?')[0];
  if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
    return;
  }
  try {
    const body = await metrics.registry.metrics();
    response.writeHead(200, { 'content-type': metrics.registry.contentType });
    response.end(request.method === 'HEAD' ? undefined : body);
  } catch {
    response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics collection failed\n');
  }
}
