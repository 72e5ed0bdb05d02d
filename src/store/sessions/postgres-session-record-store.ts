// Sessions' records on PostgreSQL, shared by every node (issue 26): the index (owner, agent's or not, title,
// last activity, the node and version of the last save) and the engine's transcripts as bytea, one row per
// transcript file. A save replaces the whole record in one transaction, and only over an older version: the
// row lock of the upsert orders two nodes saving one session at once, and the second, finding the version
// taken, is refused (session-record-store.ts). Transcripts are bounded by SERVICE_SESSIONS_MAX_BYTES before
// they get here (carried back from the run), far below bytea's 1 GB.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import { PROJECT_NAME, type SessionListing, type SessionRecord, type SessionRecordStore } from './session-record-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface SessionRow {
  id: string;
  owner: string;
  hidden: boolean;
  title: string;
  node: string;
  version: number;
}

interface TranscriptRow {
  project: string;
  content: Buffer;
  written_at_ms: number;
}

export class PostgresSessionRecordStore implements SessionRecordStore {
  private constructor(private readonly db: StoreQueries) {}

  /** Applies the store's pending migrations to the shared database, then answers the store. */
  static async open(database: PostgresDatabase): Promise<PostgresSessionRecordStore> {
    await applyPostgresMigrations(database, 'sessions', MIGRATIONS);
    return new PostgresSessionRecordStore(new StoreQueries(database, 'sessions'));
  }

  async put(record: SessionRecord): Promise<boolean> {
    for (const transcript of record.transcripts) {
      if (!PROJECT_NAME.test(transcript.project)) throw new Error(`transcript project "${transcript.project}" is not a project directory name`);
    }
    const lastActivityMs = Math.max(0, ...record.transcripts.map((transcript) => transcript.writtenAtMs));
    return this.db.transaction(async (tx) => {
      const kept = await tx.query(
        `INSERT INTO sessions (id, owner, hidden, title, node, version, last_activity_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, hidden = excluded.hidden, title = excluded.title, node = excluded.node,
           version = excluded.version, last_activity_ms = excluded.last_activity_ms, saved_at = now()
         WHERE sessions.version < excluded.version
         RETURNING id`,
        [record.id, record.owner, record.hidden, record.title, record.node, record.version, lastActivityMs],
      );
      if (kept.length === 0) return false;
      await tx.query('DELETE FROM session_transcripts WHERE session_id = $1', [record.id]);
      for (const transcript of record.transcripts) {
        await tx.query('INSERT INTO session_transcripts (session_id, project, content, written_at_ms) VALUES ($1, $2, $3, $4)', [
          record.id, transcript.project, transcript.content, transcript.writtenAtMs,
        ]);
      }
      return true;
    });
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    // One transaction: the record and its transcripts of one save, never a mix of two.
    return this.db.transaction(async (tx) => {
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      const [row] = await tx.query<SessionRow>('SELECT id, owner, hidden, title, node, version FROM sessions WHERE id = $1', [id]);
      if (!row) return undefined;
      const transcripts = await tx.query<TranscriptRow>('SELECT project, content, written_at_ms FROM session_transcripts WHERE session_id = $1 ORDER BY project', [id]);
      return {
        ...row,
        transcripts: transcripts.map((transcript) => ({ project: transcript.project, content: transcript.content, writtenAtMs: transcript.written_at_ms })),
      };
    });
  }

  async version(id: string): Promise<number> {
    const [row] = await this.db.query<{ version: number }>('SELECT version FROM sessions WHERE id = $1', [id]);
    return row?.version ?? 0;
  }

  async list(owner: string): Promise<SessionListing[]> {
    const rows = await this.db.query<{ id: string; title: string; last_activity_ms: number }>(
      'SELECT id, title, last_activity_ms FROM sessions WHERE owner = $1 AND NOT hidden ORDER BY last_activity_ms DESC, id',
      [owner],
    );
    return rows.map((row) => ({ id: row.id, title: row.title, lastActivityMs: row.last_activity_ms }));
  }

  async latestForProject(owner: string, project: string): Promise<string | undefined> {
    const [row] = await this.db.query<{ id: string }>(
      `SELECT s.id FROM sessions s JOIN session_transcripts t ON t.session_id = s.id
       WHERE s.owner = $1 AND NOT s.hidden AND t.project = $2 ORDER BY t.written_at_ms DESC, s.id LIMIT 1`,
      [owner, project],
    );
    return row?.id;
  }

  async remove(id: string): Promise<void> {
    await this.db.query('DELETE FROM sessions WHERE id = $1', [id]);
  }

  close(): void {
    this.db.close();
  }
}
