// Durable async jobs, behind a small interface: the job service talks to storage only through this,
// and test/support/job-store-contract.ts is the suite every backend (SQLite, PostgreSQL) must pass. Status
// changes are compare-and-set (`transition`), so a cancel racing a job's own end has exactly one winner.

/** A job's request as accepted, kept as JSON: the store neither reads nor validates it (core did). */
export type StoredRequest = { readonly [field: string]: unknown };

export const JOB_STATUSES = ['pending', 'running', 'completed', 'failed', 'crashed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** The statuses a job never leaves. */
export const FINISHED_STATUSES: readonly JobStatus[] = ['completed', 'failed', 'crashed', 'cancelled'];

export function isFinished(status: JobStatus): boolean {
  return FINISHED_STATUSES.includes(status);
}

/**
 * Why a job crashed: the run was killed for memory (`oom`) or for its container.timeout (`timeout`),
 * the engine died by a signal (`signal`), or the service went away under it: stopped gracefully while
 * the job was queued or running (`service_stop`), found unfinished at start-up (`service_restart`), or
 * the node running it was lost (its lease lapsed; another node of the cluster declared it, `node_lost`).
 */
export type CrashReason = 'oom' | 'timeout' | 'signal' | 'service_stop' | 'service_restart' | 'node_lost';

export interface CrashInfo {
  /** The container's exit code (137 after a kill); -1 when the service restarted and none is known. */
  readonly exit_code: number;
  /** The signal that ended the engine (SIGKILL, …), or '' when none is known. */
  readonly signal: string;
  /** The engine's stream-json lines printed before the end. */
  readonly partial_output: string;
  /** Whether the engine had printed a successful final result line before it ended. */
  readonly task_completed: boolean;
  readonly reason: CrashReason;
}

export type WebhookState = 'pending' | 'delivered' | 'failed';

export interface Job {
  readonly id: string;
  readonly status: JobStatus;
  readonly output: string;
  /** undefined when the run produced none. */
  readonly structuredOutput: unknown;
  readonly sessionId: string;
  readonly runId: string;
  readonly crashInfo: CrashInfo | null;
  readonly error: string | null;
  readonly webhookUrl: string | null;
  readonly webhookState: WebhookState | null;
  readonly request: StoredRequest;
  /** The caller that submitted it (its token's `sub`; '' with authentication off). */
  readonly owner: string;
  /** ISO 8601 timestamps (UTC, milliseconds). */
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly finishedAt: string | null;
}

export interface NewJob {
  readonly id: string;
  readonly sessionId: string;
  readonly runId: string;
  readonly webhookUrl: string | null;
  readonly request: StoredRequest;
  readonly owner: string;
  readonly createdAt: string;
  /**
   * Shared dispatch only (a store without it ignores both): `claimed`, the accepting node takes the job at
   * once (it has a free slot); `pinned`, only the accepting node may ever claim it.
   */
  readonly claimed?: boolean;
  readonly pinned?: boolean;
}

/** A status change and the fields that come with it; fields left out keep their value. */
export interface JobChange {
  readonly status: JobStatus;
  readonly output?: string;
  readonly structuredOutput?: unknown;
  readonly crashInfo?: CrashInfo;
  readonly error?: string;
}

export interface JobSummary {
  readonly id: string;
  readonly status: JobStatus;
  readonly createdAt: string;
}

export interface JobListQuery {
  /** Only this caller's jobs are listed. */
  readonly owner: string;
  readonly status?: JobStatus;
  readonly limit: number;
  readonly offset: number;
}

export interface JobStore {
  /** Stores a new job as `pending`. */
  insert(job: NewJob): Promise<Job>;
  get(id: string): Promise<Job | undefined>;
  /** Newest first (by insertion order), optionally one status only. */
  list(query: JobListQuery): Promise<JobSummary[]>;
  /**
   * Moves the job to `change.status` only if its current status is one of `from`, and returns the
   * updated job; undefined when it is unknown or in another status. Entering a finished status sets
   * finished_at and, when the job has a webhook_url, marks its webhook `pending` in the same write.
   */
  transition(id: string, from: readonly JobStatus[], change: JobChange, at: string): Promise<Job | undefined>;
  /** This node's jobs in one status, oldest first (one node: every job; on PostgreSQL: those it accepted). */
  withStatus(status: JobStatus): Promise<Job[]>;
  /** This node's finished jobs whose webhook delivery has not ended, oldest first. */
  pendingWebhooks(): Promise<Job[]>;
  setWebhookState(id: string, state: WebhookState): Promise<void>;
  countByStatus(): Promise<Record<JobStatus, number>>;
  /** Removes finished jobs whose finished_at is before `cutoff`; returns how many. */
  deleteFinishedBefore(cutoff: string): Promise<number>;
  close(): Promise<void>;
}

/** A job taken from the shared queue, and how long it waited there (submission to claim, the database's clock). */
export interface ClaimedJob {
  readonly job: Job;
  readonly waitedMs: number;
  /** The node that accepted it (whose disk holds what a pinned job needs). */
  readonly acceptedBy: string;
}

/** Where a job stands for dispatch: its status and the node that claimed it (null: none). */
export interface JobPlacement {
  readonly status: JobStatus;
  readonly claimedBy: string | null;
}

/**
 * The queue of a job store shared by several nodes (PostgreSQL, issue 26): pending jobs are claimed by the
 * nodes with free slots, oldest first, each by one node (`FOR UPDATE SKIP LOCKED`). A job moves from pending
 * to running only on the node that claimed it (JobStore.transition refuses a pending job claimed by another),
 * so claiming is the only way a job starts, and no job runs twice.
 */
export interface SharedJobQueue {
  /** The node this queue claims for. */
  readonly node: string;
  /** Claims up to `limit` claimable jobs (unclaimed, pending, not pinned to another node), oldest first. */
  claim(limit: number): Promise<ClaimedJob[]>;
  /**
   * Hands back a job this node claimed and never started (it stays pending, claimable again); `pin`: only its
   * accepting node may claim it now. False when it is no longer pending and this node's.
   */
  unclaim(id: string, options?: { readonly pin?: boolean }): Promise<boolean>;
  /** Hands back every job this node claimed and never started (a start, a stop); returns how many. */
  unclaimAll(): Promise<number>;
  /** The placement of each of `ids` still recorded. */
  placements(ids: readonly string[]): Promise<Map<string, JobPlacement>>;
  /**
   * A lost node's jobs, for another node to take over: `running`, those it claimed and started (they crash);
   * `stranded`, its pending ones no other node may claim (pinned to it; they crash too); `owedWebhooks`,
   * finished ones whose webhook it had not delivered. Its claimed and never started jobs are handed back to
   * the queue by this same call.
   */
  lostNodeJobs(node: string): Promise<{ running: Job[]; stranded: Job[]; owedWebhooks: Job[] }>;
  /** Takes over the delivery of a lost node's owed webhook; false when another node took it first. */
  takeOverWebhook(id: string, from: string): Promise<Job | undefined>;
}

/** What wakes a node's share of the shared queue (postgres-job-wakeups.ts: LISTEN/NOTIFY). */
export type JobWakeup =
  | { readonly kind: 'pending' }
  /** A job claimed by, or accepted on, one of `nodes` changed status or claimer. */
  | { readonly kind: 'changed'; readonly nodes: readonly string[] };

export interface JobWakeups {
  /** Starts listening; `on` is called for every wake-up until stop(). */
  start(on: (wakeup: JobWakeup) => void): void;
  stop(): Promise<void>;
}
