// The grants on PostgreSQL (issue 26): one table for every node, each node's rows apart (migrations/postgres/
// 001_create_grants.sql says why). The store is opened for one node and every statement names it, so a node's
// start, which revokes the grants of runs it no longer follows, leaves the other nodes' grants alone. Each
// call is one statement; a grant issued again for the same run replaces the first in one upsert.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { GrantRow, GrantStore } from './grant-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface Row {
  token_sha256: string;
  run_id: string;
  issued_at: number;
  holder: string | null;
}

export class PostgresGrantStore implements GrantStore {
  private constructor(
    private readonly db: StoreQueries,
    /** The node whose grants these are (its SERVICE_NODE_NAME). */
    private readonly node: string,
  ) {}

  /** Applies the store's pending migrations to the shared database, then answers the grants of `node`. */
  static async open(database: PostgresDatabase, node: string): Promise<PostgresGrantStore> {
    if (node === '') throw new Error('a PostgreSQL grant store needs the name of the node it is opened for');
    await applyPostgresMigrations(database, 'grants', MIGRATIONS);
    return new PostgresGrantStore(new StoreQueries(database, 'grants'), node);
  }

  async all(): Promise<GrantRow[]> {
    const rows = await this.db.query<Row>(
      'SELECT token_sha256, run_id, issued_at, holder FROM grants WHERE node = $1 ORDER BY issued_at, run_id',
      [this.node],
    );
    return rows.map((row) => ({ tokenSha256: row.token_sha256, runId: row.run_id, issuedAt: row.issued_at, holder: row.holder }));
  }

  async put(row: GrantRow): Promise<void> {
    await this.db.query(
      `INSERT INTO grants (token_sha256, node, run_id, issued_at, holder) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (node, run_id) DO UPDATE SET token_sha256 = excluded.token_sha256, issued_at = excluded.issued_at, holder = excluded.holder`,
      [row.tokenSha256, this.node, row.runId, row.issuedAt, row.holder],
    );
  }

  async setHolder(runId: string, holder: string | null): Promise<void> {
    await this.db.query('UPDATE grants SET holder = $1 WHERE node = $2 AND run_id = $3', [holder, this.node, runId]);
  }

  async remove(runId: string): Promise<void> {
    await this.db.query('DELETE FROM grants WHERE node = $1 AND run_id = $2', [this.node, runId]);
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}
