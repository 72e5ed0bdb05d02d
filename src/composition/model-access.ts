// Which model engines reach, and with which credentials: the engine's access (a credentials file, a
// Podman secret, or the embedded offline model; core/engine-access.ts) and the per-run credentials the
// model gateway admits (core/gateway/run-grants.ts).
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { stackGrantId } from '../core/compose/service-network.js';
import { EngineAccess, type EngineAccessState } from '../core/engine-access.js';
import { RunGrants } from '../core/gateway/run-grants.js';
import { startOfflineModel } from '../offline-model/server.js';
import { STACK_INSTANCE_LABEL, STACK_LABEL, type ContainerRuntime } from '../runtime/container-runtime.js';
import type { GrantStore } from '../store/gateway/grant-store.js';
import { PostgresGrantStore } from '../store/gateway/postgres-grant-store.js';
import { SqliteGrantStore } from '../store/gateway/sqlite-grant-store.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import type { Teardown } from './teardown.js';

export interface ModelAccessInputs {
  readonly config: Config;
  /** The shared database (SERVICE_DATABASE_URL): the grants are kept there, this node's apart; undefined: grants.db. */
  readonly database: PostgresDatabase | undefined;
  readonly runtime: ContainerRuntime;
  /** Runs a previous process left that are followed again: their credentials are kept. */
  readonly liveRuns: ReadonlySet<string>;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export interface ModelAccess {
  readonly engineAccess: EngineAccess;
  /** The access decided at start. */
  readonly access: EngineAccessState;
  readonly grants: RunGrants;
}

export async function buildModelAccess({ config, database, runtime, liveRuns, logger, teardown }: ModelAccessInputs): Promise<ModelAccess> {
  const engineAccess = new EngineAccess(config, runtime, async ({ host, apiKey }) =>
    startOfflineModel({
      host,
      port: config.engine.offlineModelPort,
      apiKey,
      log: (message) => logger.debug({ component: 'offline-model' }, message),
    }),
  );
  teardown.release(() => engineAccess.close());
  const access = await engineAccess.init();
  logger.info({ mode: access.mode }, access.message);
  // Those of runs that outlive a restart (jobs still running, live agents) are kept; every other one is revoked.
  const grantStore: GrantStore = database ? await PostgresGrantStore.open(database, config.cluster.nodeName) : new SqliteGrantStore(join(config.dataDir, 'grants.db'));
  teardown.release(() => grantStore.close());
  const grants = await RunGrants.open(grantStore, { log: (details, message) => logger.warn(details, message) });
  // Released before the store: the writes still queued reach it before it closes.
  teardown.release(() => grants.flush());
  // Stacks outlive the process too: their services' credential is kept for the adoption (Stacks.init).
  const stackGrants = (await runtime.listNetworks(`${STACK_INSTANCE_LABEL}=${config.instanceName}`)).flatMap((network) => {
    const sessionId = network.labels[STACK_LABEL];
    return sessionId === undefined ? [] : [stackGrantId(sessionId)];
  });
  const staleGrants = grants.retainOnly([...liveRuns, ...stackGrants]);
  if (staleGrants > 0) logger.info({ revoked: staleGrants }, 'revoked the credentials of runs the previous process left');
  // A stop that leaves jobs and agents running keeps their credentials for the next start (first of all).
  if (config.shutdown.mode === 'detach') teardown.endWorkFirst(async () => grants.detach());
  return { engineAccess, access, grants };
}
