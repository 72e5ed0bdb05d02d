// The workspace index in one SQLite file (<SERVICE_DATA_DIR>/workspaces.db); each call is one indexed
// statement, run inline (better-sqlite3 is synchronous). WAL with synchronous = NORMAL, as the grants and
// usage stores: a new session's run writes the index four times before its engine gets its prompt (its own
// workspace, the session's link, two times last used), and a fsync per commit blocked the event loop about
// 6 ms each on this 2-core host, on every pooled run's path. What NORMAL can lose is the last commits before
// a power loss (never on a crash of the process), no more than the workspace's own files, which reach the
// disk at the file system's commit interval too; a start then removes a disk the index does not know.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import type { SessionLink, WorkspaceChange, WorkspaceCopy, WorkspaceRecord, WorkspaceSource, WorkspaceStore } from './workspace-store.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

interface WorkspaceRow {
  id: string;
  owner: string;
  created_at: string;
  last_used_at: string;
  source: WorkspaceSource;
  owned_by_session: string | null;
  upload_checkpoint_at: string | null;
  run_checkpoint_at: string | null;
  size_bytes: number;
  file_count: number;
}

const COLUMNS = 'id, owner, created_at, last_used_at, source, owned_by_session, upload_checkpoint_at, run_checkpoint_at, size_bytes, file_count';

/** Store fields and their columns, for updates. */
const CHANGE_COLUMNS: Record<keyof WorkspaceChange, string> = {
  lastUsedAt: 'last_used_at',
  uploadCheckpointAt: 'upload_checkpoint_at',
  runCheckpointAt: 'run_checkpoint_at',
  sizeBytes: 'size_bytes',
  fileCount: 'file_count',
  source: 'source',
};

function toRecord(row: WorkspaceRow): WorkspaceRecord {
  return {
    id: row.id,
    owner: row.owner,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    source: row.source,
    ownedBySession: row.owned_by_session,
    uploadCheckpointAt: row.upload_checkpoint_at,
    runCheckpointAt: row.run_checkpoint_at,
    sizeBytes: row.size_bytes,
    fileCount: row.file_count,
  };
}

export class SqliteWorkspaceStore implements WorkspaceStore {
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS, { synchronous: 'NORMAL' });
    this.db.pragma('foreign_keys = ON');
  }

  private statement(sql: string): Database.Statement {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      prepared = this.db.prepare(sql);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }

  async insert(record: WorkspaceRecord): Promise<void> {
    this.statement(`INSERT INTO workspaces (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
      record.id, record.owner, record.createdAt, record.lastUsedAt, record.source, record.ownedBySession,
      record.uploadCheckpointAt, record.runCheckpointAt, record.sizeBytes, record.fileCount,
    );
  }

  async get(id: string): Promise<WorkspaceRecord | undefined> {
    const row = this.statement(`SELECT ${COLUMNS} FROM workspaces WHERE id = ?`).get(id) as WorkspaceRow | undefined;
    return row && toRecord(row);
  }

  async listByOwner(owner: string): Promise<WorkspaceRecord[]> {
    const rows = this.statement(`SELECT ${COLUMNS} FROM workspaces WHERE owner = ? ORDER BY created_at DESC, id`).all(owner) as WorkspaceRow[];
    return rows.map(toRecord);
  }

  async countCallerOwned(owner: string): Promise<number> {
    const row = this.statement('SELECT COUNT(*) AS n FROM workspaces WHERE owner = ? AND owned_by_session IS NULL').get(owner) as { n: number };
    return row.n;
  }

  async copyOf(id: string): Promise<WorkspaceCopy | undefined> {
    return this.statement('SELECT copy, node FROM workspaces WHERE id = ?').get(id) as WorkspaceCopy | undefined;
  }

  async recordCopy(id: string, node: string): Promise<number | undefined> {
    const row = this.statement('UPDATE workspaces SET copy = copy + 1, node = ? WHERE id = ? RETURNING copy').get(node, id) as { copy: number } | undefined;
    return row?.copy;
  }

  async update(id: string, change: WorkspaceChange): Promise<void> {
    const fields = (Object.keys(change) as (keyof WorkspaceChange)[]).filter((key) => change[key] !== undefined);
    if (fields.length === 0) return;
    const sql = `UPDATE workspaces SET ${fields.map((key) => `${CHANGE_COLUMNS[key]} = ?`).join(', ')} WHERE id = ?`;
    this.statement(sql).run(...fields.map((key) => change[key]), id);
  }

  async delete(id: string): Promise<void> {
    this.db.transaction(() => {
      this.statement('DELETE FROM session_workspaces WHERE workspace_id = ?').run(id);
      this.statement('DELETE FROM workspaces WHERE id = ?').run(id);
    })();
  }

  async unusedSince(isoTime: string): Promise<WorkspaceRecord[]> {
    const rows = this.statement(`SELECT ${COLUMNS} FROM workspaces WHERE last_used_at < ? ORDER BY last_used_at`).all(isoTime) as WorkspaceRow[];
    return rows.map(toRecord);
  }

  async ids(): Promise<string[]> {
    return (this.statement('SELECT id FROM workspaces').all() as { id: string }[]).map((row) => row.id);
  }

  async link(link: SessionLink): Promise<void> {
    this.statement(
      'INSERT INTO session_workspaces (session_id, workspace_id, owned) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET workspace_id = excluded.workspace_id, owned = excluded.owned',
    ).run(link.sessionId, link.workspaceId, link.owned ? 1 : 0);
  }

  async linkOf(sessionId: string): Promise<SessionLink | undefined> {
    const row = this.statement('SELECT session_id, workspace_id, owned FROM session_workspaces WHERE session_id = ?').get(sessionId) as
      | { session_id: string; workspace_id: string; owned: number }
      | undefined;
    return row && { sessionId: row.session_id, workspaceId: row.workspace_id, owned: row.owned === 1 };
  }

  async sessionsOf(workspaceId: string): Promise<string[]> {
    const rows = this.statement('SELECT session_id FROM session_workspaces WHERE workspace_id = ? ORDER BY session_id').all(workspaceId) as { session_id: string }[];
    return rows.map((row) => row.session_id);
  }

  async unlink(sessionId: string): Promise<void> {
    this.statement('DELETE FROM session_workspaces WHERE session_id = ?').run(sessionId);
  }

  close(): void {
    this.db.close();
  }
}
