// The shared database (SERVICE_DATABASE_URL, issue 26) and this node's registration on it. Unset: undefined,
// and every store is its SQLite file under SERVICE_DATA_DIR as before. Set: one PostgreSQL pool for every
// store, checked at start within a bounded time (an unreachable database stops the start naming the variable,
// never its password), closed last of the stores; then this node registers under SERVICE_NODE_NAME and holds
// its lease (core/cluster/node-registry.ts) until the stop releases it.
import { Gauge, type Registry } from 'prom-client';
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { NodeRegistry } from '../core/cluster/node-registry.js';
import { PostgresDatabase } from '../store/postgres/database.js';
import { PostgresNodeStore } from '../store/nodes/postgres-node-store.js';
import type { Teardown } from './teardown.js';

/** How long the start waits for the database before it gives up. */
const CONNECT_TIMEOUT_MS = 10_000;

export interface SharedDatabase {
  readonly database: PostgresDatabase;
  readonly node: NodeRegistry;
}

export class DatabaseUnavailableError extends Error {
  constructor(where: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(`SERVICE_DATABASE_URL: the database at ${where} cannot be used: ${reason}`, { cause });
    this.name = 'DatabaseUnavailableError';
  }
}

/** The URL as it may be shown: user, host, port and database, the password never. */
export function redactedDatabaseUrl(url: string): string {
  const parsed = new URL(url);
  parsed.password = '';
  parsed.search = '';
  return parsed.toString();
}

export async function openDatabase({ config, logger, teardown }: { readonly config: Config; readonly logger: Logger; readonly teardown: Teardown }): Promise<SharedDatabase | undefined> {
  const { databaseUrl, nodeName, nodeUrl, nodeLeaseMs } = config.cluster;
  if (databaseUrl === undefined) return undefined;
  const where = redactedDatabaseUrl(databaseUrl);
  const database = new PostgresDatabase({
    connection: databaseUrl,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    onIdleError: (error) => logger.warn({ err: error, database: where }, 'an idle PostgreSQL connection failed; the pool opens a new one when needed'),
  });
  // Released after every store (resources are released in reverse order of creation).
  teardown.release(() => database.close());
  try {
    // pg's own timeout bounds opening the connection; this one a server that accepts it and never answers.
    await Promise.race([
      database.query('SELECT 1'),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS).unref()),
    ]);
  } catch (error) {
    throw new DatabaseUnavailableError(where, error);
  }
  const nodes = await PostgresNodeStore.open(database);
  teardown.release(() => nodes.close());
  const dataId = await dataDirectoryId(config.dataDir);
  const node = await NodeRegistry.register(nodes, { name: nodeName, dataId, url: nodeUrl, version: config.version }, {
    leaseMs: nodeLeaseMs,
    onHeartbeatError: (error) => logger.error({ err: error, node: nodeName }, 'the node\'s heartbeat failed'),
  });
  // Released once the work has stopped and before the stores close: the name is free for a restart at once.
  teardown.release(() => node.deregister());
  logger.info({ node: nodeName, url: nodeUrl, database: where, leaseSeconds: nodeLeaseMs / 1000 }, 'registered as a node of the shared database');
  return { database, node };
}

/**
 * The id of this node's data directory (`node-id` in it, made at the first start): a restart on the same
 * directory is the same node, and takes its name back even within the lease of the process before.
 */
async function dataDirectoryId(dataDir: string): Promise<string> {
  const file = join(dataDir, 'node-id');
  try {
    const kept = (await readFile(file, 'utf8')).trim();
    if (/^[0-9a-f-]{36}$/.test(kept)) return kept;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const made = randomUUID();
  await writeFile(file, `${made}\n`, { mode: 0o600 });
  return made;
}

/**
 * berth_node_lease_seconds_left: how long this node's lease runs without another heartbeat (0 once lost or
 * released). It stays near the lease's length while heartbeats land; a value falling toward 0 says the
 * database is not answering them.
 */
export function exposeNodeLease(registry: Registry, node: NodeRegistry): void {
  new Gauge({
    name: 'berth_node_lease_seconds_left',
    help: 'Seconds until this node\'s lease on the shared database lapses without another heartbeat; 0 once lost or released.',
    labelNames: ['node'],
    registers: [registry],
    collect() {
      this.set({ node: node.identity.name }, node.leaseSecondsLeft());
    },
  });
}
