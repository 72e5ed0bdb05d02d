// A numbered-migration runner for SQLite stores. A migrations folder holds files named
// `<number>_<description>.sql`; each one not yet recorded in `schema_migrations` is applied, in number
// order, inside its own transaction together with its record, so a crash never leaves half a migration.
import { readdirSync, readFileSync } from 'node:fs';
import type { Database } from 'better-sqlite3';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly url: URL;
}

const FILE_NAME = /^(\d+)_([a-z0-9_-]+)\.sql$/i;

/** Lists the migrations of `dir` (a folder URL ending in `/`), sorted; refuses duplicate numbers. */
export function readMigrations(dir: URL): Migration[] {
  const folder = dir.href.endsWith('/') ? dir : new URL(`${dir.href}/`);
  const migrations: Migration[] = [];
  for (const file of readdirSync(folder)) {
    const match = FILE_NAME.exec(file);
    if (!match) continue;
    migrations.push({ version: Number(match[1]), name: match[2]!, url: new URL(file, folder) });
  }
  migrations.sort((a, b) => a.version - b.version);
  for (let i = 1; i < migrations.length; i += 1) {
    if (migrations[i]!.version === migrations[i - 1]!.version) {
      throw new Error(`migrations in ${folder.pathname}: version ${migrations[i]!.version} appears twice`);
    }
  }
  return migrations;
}

/** Applies the pending migrations of `dir` to `db`; returns the versions applied by this call. */
export function applyMigrations(db: Database, dir: URL): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY NOT NULL,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
  )`);
  const applied = new Set(
    (db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((row) => row.version),
  );
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const done: number[] = [];
  for (const migration of readMigrations(dir)) {
    if (applied.has(migration.version)) continue;
    const sql = readFileSync(migration.url, 'utf8');
    db.transaction(() => {
      db.exec(sql);
      record.run(migration.version, migration.name, new Date().toISOString());
    })();
    done.push(migration.version);
  }
  return done;
}
