// Any node, any request (issue 26): with a shared database, where each agent and running job is (the
// placement store reads the agents, jobs and nodes tables) and the counter of what this node forwarded.
// The routes forward with it (http/plugins/forward.ts); without SERVICE_DATABASE_URL there is nothing to build.
import { Counter } from 'prom-client';
import type { Config } from '../config.js';
import { ClusterForwarding } from '../core/cluster/forwarding.js';
import { FORWARD_OUTCOMES } from '../http/plugins/forward.js';
import type { RouteServices } from '../http/routes/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { PostgresPlacementStore } from '../store/placement/postgres-placement-store.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import type { Teardown } from './teardown.js';

export function buildForwarding({ config, database, metrics, teardown }: {
  readonly config: Config;
  readonly database: PostgresDatabase;
  readonly metrics: Metrics;
  readonly teardown: Teardown;
}): NonNullable<RouteServices['cluster']> {
  // Opened after the agent, job and node stores, whose tables it reads; closed before them.
  const placement = PostgresPlacementStore.open(database);
  teardown.release(() => placement.close());
  const forwarded = new Counter({
    name: 'berth_forwarded_requests_total',
    help: `Requests for an agent or a running job of another node, by route and outcome (${FORWARD_OUTCOMES.join(', ')}).`,
    labelNames: ['route', 'outcome'],
    registers: [metrics.registry],
  });
  return { forwarding: new ClusterForwarding(placement, config.cluster.nodeName), forwarded };
}
