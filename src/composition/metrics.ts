// Prometheus metrics: one registry every service reports to, served on a listener of its own
// (SERVICE_METRICS_ADDRESS), apart from the API.
import type { Config } from '../config.js';
import { startMetricsServer } from '../http/metrics-server.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import type { Teardown } from './teardown.js';

export interface ServedMetrics {
  readonly metrics: Metrics;
  /** Where GET /metrics answers. */
  readonly url: string;
}

export async function startMetrics({ config, teardown }: { readonly config: Config; readonly teardown: Teardown }): Promise<ServedMetrics> {
  const metrics = createMetrics();
  const server = await startMetricsServer(metrics, config.metricsAddress);
  teardown.release(() => server.close());
  return { metrics, url: `http://${config.metricsAddress.host}:${server.port}/metrics` };
}
