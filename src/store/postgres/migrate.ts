// The numbered-migration runner for the PostgreSQL stores, the twin of store/migrate.ts (same file names,
// `<number>_<description>.sql`, read by the same readMigrations). All stores share one database, so one table,
// schema_migrations, records what was applied per store. Several nodes start at once against that database:
// a session advisory lock lets one apply at a time, and the others, once they hold it, find the work done.
// Each migration runs in its own transaction together with its record, so a crash never leaves half of one;
// a migration must therefore be transactional (no CREATE INDEX CONCURRENTLY).
import { readFileSync } from 'node:fs';
import { readMigrations } from '../migrate.js';
import { advisoryLockKey } from './advisory-locks.js';
import type { PostgresDatabase } from './database.js';

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  store      TEXT        NOT NULL,
  version    INTEGER     NOT NULL,
  name       TEXT        NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (store, version)
)`;

/** Applies the pending migrations of `dir` for `store`; answers the versions applied by this call. */
export async function applyPostgresMigrations(database: PostgresDatabase, store: string, dir: URL): Promise<number[]> {
  const migrations = readMigrations(dir);
  return database.withConnection(async (client) => {
    // Session-level, so it spans the migrations' own transactions; released below, or with the session if the
    // connection breaks (withConnection then closes it).
    await client.query('SELECT pg_advisory_lock($1, $2)', advisoryLockKey('migrations'));
    try {
      // Under the lock: CREATE TABLE IF NOT EXISTS is not safe against itself running concurrently.
      await client.query(CREATE_TABLE);
      const applied = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations WHERE store = $1', [store])).rows.map((row) => row.version),
      );
      const done: number[] = [];
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        const sql = readFileSync(migration.url, 'utf8');
        await client.query('BEGIN');
        try {
          // No parameters: pg sends it as a simple query, which may hold several statements.
          await client.query(sql);
          await client.query('INSERT INTO schema_migrations (store, version, name) VALUES ($1, $2, $3)', [store, migration.version, migration.name]);
          await client.query('COMMIT');
        } catch (error) {
          // A rollback that fails too leaves nothing to save: the error below makes withConnection close the session.
          await client.query('ROLLBACK').catch(() => undefined);
          throw new Error(`PostgreSQL migration ${store} ${migration.version}_${migration.name} failed: ${(error as Error).message}`, { cause: error });
        }
        done.push(migration.version);
      }
      return done;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', advisoryLockKey('migrations'));
    }
  });
}
