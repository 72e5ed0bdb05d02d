// The job store in one SQLite file (<SERVICE_DATA_DIR>/jobs.db) in WAL mode with full fsync: a job
// acknowledged to its caller survives kill -9 and power loss. better-sqlite3 is synchronous and each
// call is one indexed statement, so it runs inline; the interface stays async for other backends.
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import {
  FINISHED_STATUSES, JOB_STATUSES, isFinished,
  type Job, type JobChange, type JobListQuery, type JobStatus, type JobStore, type JobSummary, type NewJob, type WebhookState,
} from './job-store.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

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
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

const COLUMNS = `id, status, output, structured_output, session_id, run_id, crash_info, error, webhook_url, webhook_state,
  request, owner, created_at, updated_at, finished_at`;

function toJob(row: JobRow): Job {
  return {
    id: row.id,
    status: row.status,
    output: row.output,
    structuredOutput: row.structured_output === null ? undefined : JSON.parse(row.structured_output),
    sessionId: row.session_id,
    runId: row.run_id,
    crashInfo: row.crash_info === null ? null : JSON.parse(row.crash_info),
    error: row.error,
    webhookUrl: row.webhook_url,
    webhookState: row.webhook_state,
    request: JSON.parse(row.request),
    owner: row.owner,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
  };
}

export class SqliteJobStore implements JobStore {
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();

  constructor(path: string) {
    this.db = openDatabase(path, MIGRATIONS);
  }

  /** Prepared once per distinct SQL text (transition builds a handful of variants). */
  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  async insert(job: NewJob): Promise<Job> {
    // RETURNING statements are run to their end with all(), never get(): get() stops after the first row and
    // the commit that follows is not reported, so a write that failed (a full disk) would look done.
    const [row] = this
      .statement(
        `INSERT INTO jobs (id, status, session_id, run_id, webhook_url, request, owner, created_at, updated_at)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
      )
      .all(job.id, job.sessionId, job.runId, job.webhookUrl, JSON.stringify(job.request), job.owner, job.createdAt, job.createdAt) as JobRow[];
    return toJob(row!);
  }

  async get(id: string): Promise<Job | undefined> {
    const row = this.statement(`SELECT ${COLUMNS} FROM jobs WHERE id = ?`).get(id) as JobRow | undefined;
    return row && toJob(row);
  }

  async list(query: JobListQuery): Promise<JobSummary[]> {
    const filtered = query.status !== undefined;
    const page = { limit: query.limit, offset: query.offset, owner: query.owner };
    const rows = this
      .statement(`SELECT id, status, created_at FROM jobs WHERE owner = @owner ${filtered ? 'AND status = @status' : ''} ORDER BY seq DESC LIMIT @limit OFFSET @offset`)
      .all(filtered ? { ...page, status: query.status } : page) as Pick<JobRow, 'id' | 'status' | 'created_at'>[];
    return rows.map((row) => ({ id: row.id, status: row.status, createdAt: row.created_at }));
  }

  async transition(id: string, from: readonly JobStatus[], change: JobChange, at: string): Promise<Job | undefined> {
    if (from.length === 0) return undefined;
    const finished = isFinished(change.status);
    const sets = ['status = @status', 'updated_at = @at'];
    if (change.output !== undefined) sets.push('output = @output');
    if (change.structuredOutput !== undefined) sets.push('structured_output = @structuredOutput');
    if (change.crashInfo !== undefined) sets.push('crash_info = @crashInfo');
    if (change.error !== undefined) sets.push('error = @error');
    if (finished) {
      sets.push('finished_at = @at');
      sets.push(`webhook_state = CASE WHEN webhook_url IS NULL THEN NULL ELSE 'pending' END`);
    }
    const placeholders = from.map((_, index) => `@from${index}`).join(', ');
    const parameters: Record<string, unknown> = {
      id,
      at,
      status: change.status,
      output: change.output,
      structuredOutput: change.structuredOutput === undefined ? undefined : JSON.stringify(change.structuredOutput),
      crashInfo: change.crashInfo === undefined ? undefined : JSON.stringify(change.crashInfo),
      error: change.error,
    };
    from.forEach((status, index) => {
      parameters[`from${index}`] = status;
    });
    const [row] = this
      .statement(`UPDATE jobs SET ${sets.join(', ')} WHERE id = @id AND status IN (${placeholders}) RETURNING ${COLUMNS}`)
      .all(Object.fromEntries(Object.entries(parameters).filter(([, value]) => value !== undefined))) as (JobRow | undefined)[];
    return row && toJob(row);
  }

  async withStatus(status: JobStatus): Promise<Job[]> {
    const rows = this.statement(`SELECT ${COLUMNS} FROM jobs WHERE status = ? ORDER BY seq`).all(status) as JobRow[];
    return rows.map(toJob);
  }

  async pendingWebhooks(): Promise<Job[]> {
    const rows = this.statement(`SELECT ${COLUMNS} FROM jobs WHERE webhook_state = 'pending' ORDER BY seq`).all() as JobRow[];
    return rows.map(toJob);
  }

  async setWebhookState(id: string, state: WebhookState): Promise<void> {
    this.statement('UPDATE jobs SET webhook_state = ? WHERE id = ? AND webhook_url IS NOT NULL').run(state, id);
  }

  async countByStatus(): Promise<Record<JobStatus, number>> {
    const counts = Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as Record<JobStatus, number>;
    const rows = this.statement('SELECT status, count(*) AS n FROM jobs GROUP BY status').all() as { status: JobStatus; n: number }[];
    for (const row of rows) counts[row.status] = row.n;
    return counts;
  }

  async deleteFinishedBefore(cutoff: string): Promise<number> {
    const statuses = FINISHED_STATUSES.map((status) => `'${status}'`).join(', ');
    return this.statement(`DELETE FROM jobs WHERE finished_at < ? AND status IN (${statuses})`).run(cutoff).changes;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
