// Opens one of Berth's SQLite files the way every store needs it: WAL, full fsync (an acknowledged job or
// logout must survive power loss), a busy timeout, and its numbered migrations applied. A store whose
// writes sit in a hot path and may lose their last moments at a power loss (usage records) opts into
// `synchronous: 'NORMAL'`: in WAL mode that still never corrupts the file, it only skips the fsync per commit.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { applyMigrations } from './migrate.js';

export interface DatabaseOptions {
  /** FULL (default): every commit is fsynced. NORMAL: commits reach the disk at checkpoints. */
  readonly synchronous?: 'FULL' | 'NORMAL';
}

export function openDatabase(path: string, migrations: URL, options: DatabaseOptions = {}): Database.Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
    db.pragma('busy_timeout = 5000');
    applyMigrations(db, migrations);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** SQLite could not write because its disk (or the file system's quota) is full: worth retrying once space is freed. */
export function isStorageFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_FULL' || (typeof code === 'string' && code.startsWith('SQLITE_IOERR'));
}
