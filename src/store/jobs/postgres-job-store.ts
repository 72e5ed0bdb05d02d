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
  type ClaimedJob, type Job, type JobChange, type JobListQuery, type JobPlacement, type JobStatus, type JobStore, type JobSummary, type NewJob,
  type SharedJobQueue, type WebhookState,
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

/**
 * A new run id for a job's next attempt, the same form as newRunId()'s: a run's container (`berth-<run id>`)
 * and configuration directory are named by it, and a container may exist for an attempt that never started
 * (a pooled engine claimed at submission takes the run's name a second later). A job claimed by a node that
 * did not accept it, or handed back by a node that may have made such a container (lost, or a process that
 * ended), gets one, so that no attempt meets another's container, on one host's Podman storage or on several.
 */
const NEW_RUN_ID = `'run-' || gen_random_uuid()::text`;
const NEW_ATTEMPT = `run_id = ${NEW_RUN_ID}`;

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

export class PostgresJobStore implements JobStore, SharedJobQueue {
  private constructor(
    private readonly db: StoreQueries,
    /** The node this store serves: its inserts are this node's jobs, withStatus and pendingWebhooks answer only them. */
    readonly node: string,
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
    // A job claimed at once is claimed when it is queued (claimed_at = queued_at: its dispatch took no time, and
    // the two being equal tells this path from a claim out of the queue); otherwise the insert's
    // trigger wakes every node (NOTIFY berth_jobs 'pending', sent at commit).
    const [row] = await this.db.query<JobRow>(
      `INSERT INTO jobs (id, status, session_id, run_id, webhook_url, request, owner, created_at, updated_at, node, accepted_by, pinned, claimed_by, queued_at, claimed_at)
       VALUES ($1, 'pending', $2, $3, $4, $5, $6, $7, $7, $8, $8, $9, CASE WHEN $10 THEN $8 END, statement_timestamp(), CASE WHEN $10 THEN statement_timestamp() END)
       RETURNING ${COLUMNS}`,
      [job.id, job.sessionId, job.runId, job.webhookUrl, JSON.stringify(job.request), job.owner, job.createdAt, this.node, job.pinned === true, job.claimed === true],
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
    values.push(this.node);
    const node = `$${values.length}`;
    if (isFinished(change.status)) {
      // This node moved the job to its end: it owes the webhook.
      sets.push('finished_at = $4', `webhook_state = CASE WHEN webhook_url IS NULL THEN NULL ELSE 'pending' END`, `finished_by = ${node}`);
    }
    // Started only by the node that claimed it (or, unclaimed, by this node, which then holds it): a node that
    // lost its claim (handed back while it was paused, claimed by another) cannot start the job a second time.
    let started = '';
    if (change.status === 'running') {
      sets.push(`claimed_by = ${node}`, `node = ${node}`, 'claimed_at = coalesce(claimed_at, clock_timestamp())');
      started = ` AND (status <> 'pending' OR claimed_by IS NULL OR claimed_by = ${node})`;
    }
    const [row] = await this.db.query<JobRow>(
      `UPDATE jobs SET ${sets.join(', ')} WHERE id = $1 AND status = ANY($2::text[])${started} RETURNING ${COLUMNS}`,
      values,
    );
    return row && toJob(row);
  }

  /** Running: those this node claimed (their containers are on its Podman); pending: those it accepted. */
  async withStatus(status: JobStatus): Promise<Job[]> {
    const column = status === 'running' ? 'claimed_by' : 'accepted_by';
    return (await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE ${column} = $2 AND status = $1 ORDER BY seq`, [status, this.node])).map(toJob);
  }

  /** The webhooks this node owes: of the jobs it finished (or whose delivery it took over from a lost node). */
  async pendingWebhooks(): Promise<Job[]> {
    return (await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE finished_by = $1 AND webhook_state = 'pending' ORDER BY seq`, [this.node])).map(toJob);
  }

  async claim(limit: number): Promise<ClaimedJob[]> {
    if (limit < 1) return [];
    // SKIP LOCKED: rows another claimer has locked are passed over, not waited for, so claimers never queue
    // behind each other, and a row is claimed by the one transaction that locked it. The oldest are picked in
    // a CTE, evaluated once: a `WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)` may be re-run by the
    // planner and claim more than n (seen here: 6 of a limit of 4). A node that did not accept the job runs
    // it under a run id of its own (NEW_RUN_ID): its accepting node may hold a pooled engine for it, already
    // named after the accepted run id, until it sees the claim.
    const rows = await this.db.query<JobRow & { waited_ms: number; seq: number; accepted_by: string | null }>(
      `WITH next AS (
         SELECT seq FROM jobs WHERE status = 'pending' AND claimed_by IS NULL AND (NOT pinned OR accepted_by = $1)
         ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)
       UPDATE jobs SET claimed_by = $1, node = $1, claimed_at = clock_timestamp(),
         run_id = CASE WHEN jobs.accepted_by = $1 THEN jobs.run_id ELSE ${NEW_RUN_ID} END
       FROM next WHERE jobs.seq = next.seq AND jobs.status = 'pending' AND jobs.claimed_by IS NULL
       RETURNING ${COLUMNS}, (extract(epoch FROM claimed_at - queued_at) * 1000)::float8 AS waited_ms, jobs.seq, accepted_by`,
      [this.node, limit],
    );
    return rows
      .sort((a, b) => a.seq - b.seq)
      .map((row) => ({ job: toJob(row), waitedMs: Math.max(0, row.waited_ms), acceptedBy: row.accepted_by ?? '' }));
  }

  async unclaim(id: string, options: { readonly pin?: boolean } = {}): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE jobs SET claimed_by = NULL, claimed_at = NULL, node = accepted_by, queued_at = clock_timestamp(), pinned = pinned OR $3
       WHERE id = $1 AND status = 'pending' AND claimed_by = $2 RETURNING 1`,
      [id, this.node, options.pin === true],
    );
    return rows.length > 0;
  }

  async unclaimAll(): Promise<number> {
    // A fresh run id (NEW_ATTEMPT): what a previous process of this node held for them is not known here.
    const rows = await this.db.query(
      `UPDATE jobs SET claimed_by = NULL, claimed_at = NULL, node = accepted_by, queued_at = clock_timestamp(), ${NEW_ATTEMPT}
       WHERE status = 'pending' AND claimed_by = $1 RETURNING 1`,
      [this.node],
    );
    return rows.length;
  }

  async placements(ids: readonly string[]): Promise<Map<string, JobPlacement>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db.query<{ id: string; status: JobStatus; claimed_by: string | null }>(
      'SELECT id, status, claimed_by FROM jobs WHERE id = ANY($1::text[])',
      [ids],
    );
    return new Map(rows.map((row) => [row.id, { status: row.status, claimedBy: row.claimed_by }]));
  }

  async lostNodeJobs(node: string): Promise<{ running: Job[]; stranded: Job[]; owedWebhooks: Job[] }> {
    // Claimed and never started: nothing of them ran (the prompt reaches an engine only after the move to
    // running), but a container may have been made for them: a pooled engine claimed at submission, renamed
    // to the run's name a second later. They go back to the queue under a fresh run id (NEW_ATTEMPT), so
    // the next attempt's container never takes the lost node's leftover's name (one host's Podman storage
    // shared by several nodes, as in make cluster; the leftover goes at the lost node's next start).
    await this.db.query(
      `UPDATE jobs SET claimed_by = NULL, claimed_at = NULL, node = accepted_by, queued_at = clock_timestamp(), ${NEW_ATTEMPT}
       WHERE status = 'pending' AND claimed_by = $1`,
      [node],
    );
    const running = await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE status = 'running' AND claimed_by = $1 ORDER BY seq`, [node]);
    const stranded = await this.db.query<JobRow>(
      `SELECT ${COLUMNS} FROM jobs WHERE status = 'pending' AND claimed_by IS NULL AND pinned AND accepted_by = $1 ORDER BY seq`,
      [node],
    );
    const owed = await this.db.query<JobRow>(`SELECT ${COLUMNS} FROM jobs WHERE finished_by = $1 AND webhook_state = 'pending' ORDER BY seq`, [node]);
    return { running: running.map(toJob), stranded: stranded.map(toJob), owedWebhooks: owed.map(toJob) };
  }

  async takeOverWebhook(id: string, from: string): Promise<Job | undefined> {
    const [row] = await this.db.query<JobRow>(
      `UPDATE jobs SET finished_by = $3 WHERE id = $1 AND finished_by = $2 AND webhook_state = 'pending' RETURNING ${COLUMNS}`,
      [id, from, this.node],
    );
    return row && toJob(row);
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
