// The grants in one SQLite file (<SERVICE_DATA_DIR>/grants.db). WAL with synchronous = NORMAL: a grant is
// written on every run's path (issued, bound, revoked), where a fsync per commit would cost the run time,
// and a grant only has to outlive the Berth process, not a power loss (the containers holding the tokens
// do not survive one either). A commit lost that way is harmless: at start every grant whose run is not
// live is revoked (RunGrants.retainOnly), and a run whose grant is missing has its model requests refused.
// Its answers are promises (the PostgreSQL store's interface) settled at once: the work is done when a call
// returns.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import type { GrantRow, GrantStore } from './grant-store.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

interface Row {
  token_sha256: string;
  run_id: string;
  issued_at: number;
  holder: string | null;
}

export class SqliteGrantStore implements GrantStore {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;
  private readonly removeRun: Database.Statement;
  private readonly updateHolder: Database.Statement;

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS, { synchronous: 'NORMAL' });
    this.insert = this.db.prepare('INSERT INTO grants (token_sha256, run_id, issued_at, holder) VALUES (?, ?, ?, ?)');
    this.removeRun = this.db.prepare('DELETE FROM grants WHERE run_id = ?');
    this.updateHolder = this.db.prepare('UPDATE grants SET holder = ? WHERE run_id = ?');
  }

  async all(): Promise<GrantRow[]> {
    const rows = this.db.prepare('SELECT token_sha256, run_id, issued_at, holder FROM grants ORDER BY issued_at, run_id').all() as Row[];
    return rows.map((row) => ({ tokenSha256: row.token_sha256, runId: row.run_id, issuedAt: row.issued_at, holder: row.holder }));
  }

  async put(row: GrantRow): Promise<void> {
    this.db.transaction(() => {
      this.removeRun.run(row.runId);
      this.insert.run(row.tokenSha256, row.runId, row.issuedAt, row.holder);
    })();
  }

  async setHolder(runId: string, holder: string | null): Promise<void> {
    this.updateHolder.run(holder, runId);
  }

  async remove(runId: string): Promise<void> {
    this.removeRun.run(runId);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
