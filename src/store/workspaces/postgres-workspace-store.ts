// The workspace index on PostgreSQL, shared by every node (issue 26): which workspaces exist, whose they are,
// when they were last used, and which session uses which. Each call is one statement; a workspace's session
// links go with it by the foreign key's ON DELETE CASCADE.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { SessionLink, WorkspaceChange, WorkspaceCopy, WorkspaceRecord, WorkspaceSource, WorkspaceStore } from './workspace-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface WorkspaceRow {
  id: string;
  owner: string;
  created_at: Date;
  last_used_at: Date;
  source: WorkspaceSource;
  owned_by_session: string | null;
  upload_checkpoint_at: Date | null;
  run_checkpoint_at: Date | null;
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

const iso = (time: Date | null): string | null => (time === null ? null : time.toISOString());

function toRecord(row: WorkspaceRow): WorkspaceRecord {
  return {
    id: row.id,
    owner: row.owner,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at.toISOString(),
    source: row.source,
    ownedBySession: row.owned_by_session,
    uploadCheckpointAt: iso(row.upload_checkpoint_at),
    runCheckpointAt: iso(row.run_checkpoint_at),
    sizeBytes: row.size_bytes,
    fileCount: row.file_count,
  };
}

export class PostgresWorkspaceStore implements WorkspaceStore {
  private constructor(private readonly db: StoreQueries) {}

  /** Applies the store's pending migrations to the shared database, then answers the store. */
  static async open(database: PostgresDatabase): Promise<PostgresWorkspaceStore> {
    await applyPostgresMigrations(database, 'workspaces', MIGRATIONS);
    return new PostgresWorkspaceStore(new StoreQueries(database, 'workspaces'));
  }

  async insert(record: WorkspaceRecord): Promise<void> {
    await this.db.query(`INSERT INTO workspaces (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, [
      record.id, record.owner, record.createdAt, record.lastUsedAt, record.source, record.ownedBySession,
      record.uploadCheckpointAt, record.runCheckpointAt, record.sizeBytes, record.fileCount,
    ]);
  }

  async get(id: string): Promise<WorkspaceRecord | undefined> {
    const [row] = await this.db.query<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE id = $1`, [id]);
    return row && toRecord(row);
  }

  async listByOwner(owner: string): Promise<WorkspaceRecord[]> {
    const rows = await this.db.query<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE owner = $1 ORDER BY created_at DESC, id`, [owner]);
    return rows.map(toRecord);
  }

  async countCallerOwned(owner: string): Promise<number> {
    const [row] = await this.db.query<{ n: number }>('SELECT count(*) AS n FROM workspaces WHERE owner = $1 AND owned_by_session IS NULL', [owner]);
    return row!.n;
  }

  async copyOf(id: string): Promise<WorkspaceCopy | undefined> {
    const [row] = await this.db.query<WorkspaceCopy>('SELECT copy, node FROM workspaces WHERE id = $1', [id]);
    return row && { copy: row.copy, node: row.node };
  }

  async recordCopy(id: string, node: string): Promise<number | undefined> {
    // One statement: of two nodes recording at once, each gets a number of its own.
    const [row] = await this.db.query<{ copy: number }>('UPDATE workspaces SET copy = copy + 1, node = $2 WHERE id = $1 RETURNING copy', [id, node]);
    return row?.copy;
  }

  async update(id: string, change: WorkspaceChange): Promise<void> {
    const fields = (Object.keys(change) as (keyof WorkspaceChange)[]).filter((key) => change[key] !== undefined);
    if (fields.length === 0) return;
    const sets = fields.map((key, index) => `${CHANGE_COLUMNS[key]} = $${index + 2}`);
    await this.db.query(`UPDATE workspaces SET ${sets.join(', ')} WHERE id = $1`, [id, ...fields.map((key) => change[key])]);
  }

  async delete(id: string): Promise<void> {
    await this.db.query('DELETE FROM workspaces WHERE id = $1', [id]);
  }

  async unusedSince(isoTime: string): Promise<WorkspaceRecord[]> {
    const rows = await this.db.query<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE last_used_at < $1 ORDER BY last_used_at`, [isoTime]);
    return rows.map(toRecord);
  }

  async ids(): Promise<string[]> {
    return (await this.db.query<{ id: string }>('SELECT id FROM workspaces')).map((row) => row.id);
  }

  async link(link: SessionLink): Promise<void> {
    await this.db.query(
      `INSERT INTO session_workspaces (session_id, workspace_id, owned) VALUES ($1, $2, $3)
       ON CONFLICT (session_id) DO UPDATE SET workspace_id = excluded.workspace_id, owned = excluded.owned`,
      [link.sessionId, link.workspaceId, link.owned],
    );
  }

  async linkOf(sessionId: string): Promise<SessionLink | undefined> {
    const [row] = await this.db.query<{ session_id: string; workspace_id: string; owned: boolean }>(
      'SELECT session_id, workspace_id, owned FROM session_workspaces WHERE session_id = $1',
      [sessionId],
    );
    return row && { sessionId: row.session_id, workspaceId: row.workspace_id, owned: row.owned };
  }

  async sessionsOf(workspaceId: string): Promise<string[]> {
    const rows = await this.db.query<{ session_id: string }>(
      'SELECT session_id FROM session_workspaces WHERE workspace_id = $1 ORDER BY session_id',
      [workspaceId],
    );
    return rows.map((row) => row.session_id);
  }

  async unlink(sessionId: string): Promise<void> {
    await this.db.query('DELETE FROM session_workspaces WHERE session_id = $1', [sessionId]);
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  close(): void {
    this.db.close();
  }
}
