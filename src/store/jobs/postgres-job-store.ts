// The job store on PostgreSQL, shared by every node (issue 26). Each call is one statement; a transition is one
// compare-and-set UPDATE: PostgreSQL locks the row and re-checks the status of the version it finds, so of two
// nodes moving the same job at once exactly one wins, as in the SQLite file. JSON documents and free text are
// written as JSON text and read back as text (::text) to be parsed here, so a JSON null, an absent value and a
// NUL character come back as they went in (migrations/postgres/001_create_jobs.sql).
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import {
  FINISHED_STATUSES, JOB_STATUSES, isFinished,
  type Job, type JobChange, type JobListQuery, type JobStatus, type JobStore, type JobSummary, type NewJob, type WebhookState,
} from './job-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

interface JobRow {
  id: string;
  status: JobStatus;
  output: string;
  structured_output: string | null;
  session_id: string;
  run_id: string;
  crash_info: string | null;
  error: string | null;
  webhook_url: string | null;
  webhook_state: WebhookState | null;
  request: string;
  owner: string;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

const COLUMNS = `id, status, output::text AS output, structured_output::text AS structured_output, session_id, run_id,
  crash_info::text AS crash_info, error::text AS error, webhook_url, webhook_state, request::text AS request, owner,
  created_at, updated_at, finished_at`;

function toJob(row: JobRow): Job {
  return {
    id: row.id,
    status: row.status,
    output: JSON.parse(row.output) as string,
    structuredOutput: row.structured_output === null ? undefined : JSON.parse(row.structured_output),
    sessionId: row.session_id,
    runId: row.run_id,
    crashInfo: row.crash_info === null ? null : JSON.parse(row.crash_info),
    error: row.error === null ? null : (JSON.parse(row.error) as string),
    webhookUrl: row.webhook_url,
    webhookState: row.webhook_state,
    request: JSON.parse(row.request),
    owner: row.owner,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    finishedAt: row.finished_at === null ? null : row.finished_at.toISOString(),
  };
}

export class PostgresJobStore implements JobStore {
  private constructor(
    private readonly db: StoreQueries,
    /** The node this store serves: its inserts are this node's jobs, withStatus and pendingWebhooks answer only them. */
    private readonly node: string,
  ) {}

  /**
   * Applies the store's pending migrations to the shared database, then answers the store for `node`: every
   * node reads and changes every job (GET /jobs/{id} answers on any node), but a node's start follows again,
   * crashes or re-queues only the jobs it accepted, and resumes only their webhook deliveries.
   */
  static async open(database: PostgresDatabase, node: string): Promise<PostgresJobStore> {
    await applyPostgresMigrations(database, 'jobs', MIGRATIONS);
    return new PostgresJobStore(new StoreQueries(database, 'jobs'), node);
  }

  async insert(job: NewJob): Promise<Job> {
    const [row] = await this.db.query<JobRow>(
      `INSERT INTO jobs (id, status, session_id, run_id, webhook_url, request, owner, created_at, updated_at, node)
       VALUES ($1, 'pending', $2, $3, $4, $5, $6, $7, $7, $8) RETURNING ${COLUMNS}`,
      [job.id, job.sessionId, job.runId, job.webhookUrl, JSON.stringify(job.request), job.owner, job.createdAt, this.node],
    );
    return toJob(row!);
  }

  async get(id: string): Promise<Job | undefined> {
    const [row] = await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE id = $1`, [id]);
    return row && toJob(row);
  }

  async list(query: JobListQuery): Promise<JobSummary[]> {
    const rows = await this.db.query<Pick<JobRow, 'id' | 'status' | 'created_at'>>(
      `SELECT id, status, created_at FROM jobs WHERE owner = $1 AND ($2::text IS NULL OR status = $2)
       ORDER BY seq DESC LIMIT $3 OFFSET $4`,
      [query.owner, query.status ?? null, query.limit, query.offset],
    );
    return rows.map((row) => ({ id: row.id, status: row.status, createdAt: row.created_at.toISOString() }));
  }

  async transition(id: string, from: readonly JobStatus[], change: JobChange, at: string): Promise<Job | undefined> {
    if (from.length === 0) return undefined;
    const values: unknown[] = [id, from, change.status, at];
    const sets = ['status = $3', 'updated_at = $4'];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (change.output !== undefined) set('output', JSON.stringify(change.output));
    if (change.structuredOutput !== undefined) set('structured_output', JSON.stringify(change.structuredOutput));
    if (change.crashInfo !== undefined) set('crash_info', JSON.stringify(change.crashInfo));
    if (change.error !== undefined) set('error', JSON.stringify(change.error));
    if (isFinished(change.status)) {
      sets.push('finished_at = $4', `webhook_state = CASE WHEN webhook_url IS NULL THEN NULL ELSE 'pending' END`);
    }
    const [row] = await this.db.query<JobRow>(
      `UPDATE jobs SET ${sets.join(', ')} WHERE id = $1 AND status = ANY($2::text[]) RETURNING ${COLUMNS}`,
      values,
    );
    return row && toJob(row);
  }

  async withStatus(status: JobStatus): Promise<Job[]> {
    return (await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE node = $2 AND status = $1 ORDER BY seq`, [status, this.node])).map(toJob);
  }

  async pendingWebhooks(): Promise<Job[]> {
    return (await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE node = $1 AND webhook_state = 'pending' ORDER BY seq`, [this.node])).map(toJob);
  }

  async setWebhookState(id: string, state: WebhookState): Promise<void> {
    await this.db.query('UPDATE jobs SET webhook_state = $1 WHERE id = $2 AND webhook_url IS NOT NULL', [state, id]);
  }

  async countByStatus(): Promise<Record<JobStatus, number>> {
    const counts = Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as Record<JobStatus, number>;
    for (const row of await this.db.query<{ status: JobStatus; n: number }>('SELECT status, count(*) AS n FROM jobs GROUP BY status')) {
      counts[row.status] = row.n;
    }
    return counts;
  }

  async deleteFinishedBefore(cutoff: string): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      `WITH gone AS (DELETE FROM jobs WHERE finished_at < $1 AND status = ANY($2::text[]) RETURNING 1) SELECT count(*) AS n FROM gone`,
      [cutoff, FINISHED_STATUSES],
    );
    return row!.n;
  }

  /** Closes this store; the shared database stays open for the others (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}
