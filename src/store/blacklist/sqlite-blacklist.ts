// The durable blacklist backend, configured as `bolt` (the name is kept for compatibility): one SQLite
// file in WAL mode at SERVICE_AUTH_BLACKLIST_BOLT_PATH. better-sqlite3 is synchronous; a logout or a
// lookup is one indexed statement, so it runs inline. Any SQLite error rejects the promise, and the
// caller fails closed.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import type { TokenBlacklist } from './blacklist.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

export class SqliteBlacklist implements TokenBlacklist {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[string, number]>;
  private readonly select: Database.Statement<[string], { found: number }>;
  private readonly sweep: Database.Statement<[number]>;

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS);
    try {
      this.insert = this.db.prepare(
        `INSERT INTO token_blacklist (jti, expires_at_ms) VALUES (?, ?)
         ON CONFLICT (jti) DO UPDATE SET expires_at_ms = max(expires_at_ms, excluded.expires_at_ms)`,
      );
      this.select = this.db.prepare('SELECT 1 AS found FROM token_blacklist WHERE jti = ?');
      this.sweep = this.db.prepare('DELETE FROM token_blacklist WHERE expires_at_ms <= ?');
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  async add(jti: string, expiresAtMs: number): Promise<void> {
    this.insert.run(jti, Math.ceil(expiresAtMs));
  }

  async has(jti: string): Promise<boolean> {
    return this.select.get(jti) !== undefined;
  }

  async removeExpired(nowMs: number): Promise<number> {
    return this.sweep.run(Math.floor(nowMs)).changes;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
