// The token blacklist on PostgreSQL, shared by every node (issue 26): a token logged out through one node is
// refused by all. A logout or a lookup is one indexed statement. Any error rejects the promise, and the caller
// fails closed; so does a call after close().
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { TokenBlacklist } from './blacklist.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

export class PostgresBlacklist implements TokenBlacklist {
  private constructor(private readonly db: StoreQueries) {}

  /** Applies the store's pending migrations to the shared database, then answers the store. */
  static async open(database: PostgresDatabase): Promise<PostgresBlacklist> {
    await applyPostgresMigrations(database, 'blacklist', MIGRATIONS);
    return new PostgresBlacklist(new StoreQueries(database, 'blacklist'));
  }

  async add(jti: string, expiresAtMs: number): Promise<void> {
    await this.db.query(
      `INSERT INTO token_blacklist (jti, expires_at_ms) VALUES ($1, $2)
       ON CONFLICT (jti) DO UPDATE SET expires_at_ms = GREATEST(token_blacklist.expires_at_ms, excluded.expires_at_ms)`,
      [jti, Math.ceil(expiresAtMs)],
    );
  }

  async has(jti: string): Promise<boolean> {
    return (await this.db.query('SELECT 1 FROM token_blacklist WHERE jti = $1', [jti])).length > 0;
  }

  async removeExpired(nowMs: number): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      'WITH gone AS (DELETE FROM token_blacklist WHERE expires_at_ms <= $1 RETURNING 1) SELECT count(*) AS n FROM gone',
      [Math.floor(nowMs)],
    );
    return row!.n;
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}
