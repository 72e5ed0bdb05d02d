// The nodes table on PostgreSQL (node-store.ts). A claim is one upsert whose update applies only where the
// lease is free (released or lapsed), so of two processes claiming one name at once exactly one gets it:
// PostgreSQL re-checks the condition on the row version it locks.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { NodeClaim, NodeIdentity, NodeRecord, NodeStore } from './node-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface NodeRow {
  name: string;
  url: string;
  version: string;
  started_at: Date;
  heartbeat_at: Date;
  expires_at: Date;
  released_at: Date | null;
}

const COLUMNS = 'name, url, version, started_at, heartbeat_at, expires_at, released_at';
/** now() + $n milliseconds, the lease's end on the database's clock. */
const LEASE_END = (parameter: string) => `now() + ${parameter}::bigint * interval '1 millisecond'`;

function toRecord(row: NodeRow): NodeRecord {
  return {
    name: row.name,
    url: row.url,
    version: row.version,
    startedAt: row.started_at.toISOString(),
    heartbeatAt: row.heartbeat_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    releasedAt: row.released_at === null ? null : row.released_at.toISOString(),
  };
}

export class PostgresNodeStore implements NodeStore {
  private constructor(private readonly db: StoreQueries) {}

  static async open(database: PostgresDatabase): Promise<PostgresNodeStore> {
    await applyPostgresMigrations(database, 'nodes', MIGRATIONS);
    return new PostgresNodeStore(new StoreQueries(database, 'nodes'));
  }

  async claim(identity: NodeIdentity, holder: string, leaseMs: number): Promise<NodeClaim> {
    const [taken] = await this.db.query<NodeRow>(
      `INSERT INTO nodes (name, url, version, holder, data_id, started_at, heartbeat_at, expires_at)
       VALUES ($1, $2, $3, $4, $6, now(), now(), ${LEASE_END('$5')})
       ON CONFLICT (name) DO UPDATE SET url = excluded.url, version = excluded.version, holder = excluded.holder,
         data_id = excluded.data_id, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
         expires_at = excluded.expires_at, released_at = NULL, loss_handler = NULL, loss_handler_until = NULL, loss_handled_at = NULL
       WHERE nodes.released_at IS NOT NULL OR nodes.expires_at <= now() OR nodes.data_id = excluded.data_id
       RETURNING ${COLUMNS}`,
      [identity.name, identity.url, identity.version, holder, Math.ceil(leaseMs), identity.dataId],
    );
    if (taken) return { claimed: true, node: toRecord(taken) };
    const [held] = await this.db.query<NodeRow>(`SELECT ${COLUMNS} FROM nodes WHERE name = $1`, [identity.name]);
    // Released between the two statements: the caller may simply claim again.
    if (!held) return this.claim(identity, holder, leaseMs);
    return { claimed: false, holder: toRecord(held) };
  }

  async heartbeat(name: string, holder: string, leaseMs: number): Promise<NodeRecord | null> {
    const [row] = await this.db.query<NodeRow>(
      `UPDATE nodes SET heartbeat_at = now(), expires_at = ${LEASE_END('$3')}
       WHERE name = $1 AND holder = $2 AND released_at IS NULL AND loss_handler IS NULL
       RETURNING ${COLUMNS}`,
      [name, holder, Math.ceil(leaseMs)],
    );
    return row ? toRecord(row) : null;
  }

  async release(name: string, holder: string): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE nodes SET released_at = now(), expires_at = LEAST(expires_at, now())
       WHERE name = $1 AND holder = $2 AND released_at IS NULL RETURNING 1`,
      [name, holder],
    );
    return rows.length > 0;
  }

  async expired(): Promise<NodeRecord[]> {
    const rows = await this.db.query<NodeRow>(`SELECT ${COLUMNS} FROM nodes WHERE released_at IS NULL AND expires_at <= now() AND loss_handled_at IS NULL ORDER BY name`);
    return rows.map(toRecord);
  }

  async takeLoss(name: string, handler: string, forMs: number): Promise<boolean> {
    // Re-checked on the row PostgreSQL locks: of nodes taking it at once, one gets it; a heartbeat that lands
    // first (the lease renewed) makes it fail, and once it is taken no heartbeat renews the lease.
    const rows = await this.db.query(
      `UPDATE nodes SET loss_handler = $2, loss_handler_until = ${LEASE_END('$3')}
       WHERE name = $1 AND name <> $2 AND released_at IS NULL AND expires_at <= now() AND loss_handled_at IS NULL
         AND (loss_handler IS NULL OR loss_handler = $2 OR loss_handler_until <= now())
       RETURNING 1`,
      [name, handler, Math.ceil(forMs)],
    );
    return rows.length > 0;
  }

  async lossHandled(name: string, handler: string): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE nodes SET loss_handled_at = now() WHERE name = $1 AND loss_handler = $2 AND loss_handled_at IS NULL RETURNING 1`,
      [name, handler],
    );
    return rows.length > 0;
  }

  async list(): Promise<NodeRecord[]> {
    return (await this.db.query<NodeRow>(`SELECT ${COLUMNS} FROM nodes ORDER BY name`)).map(toRecord);
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}
