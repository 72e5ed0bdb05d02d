// Readable names for the request and response shapes of Berth's API. All but the stream frames are taken
// from the types generated from Berth's OpenAPI document (generated/openapi.ts), so a field added to a
// route reaches these names with `npm run generate -w @berth/client`. Server-Sent Event frames are not
// described by the document (their schema there is "a string"), so they are written here.
// Object shapes are declared as interfaces extending the generated types (rather than aliases of them)
// so that editors and the API reference show their name and their fields, not the path they come from.

import type { components, paths } from './generated/openapi.js';

type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Answer<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: { 200: infer R } } ? JsonOf<R> : never;
type Created<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: { 201: infer R } } ? JsonOf<R> : never;
type Body<P extends keyof paths, M extends 'post'> =
  Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;
type Query<P extends keyof paths, M extends 'get'> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
type Schema<N extends keyof components['schemas']> = components['schemas'][N];
type Element<A> = A extends readonly (infer E)[] ? E : never;
type Field<T, K extends keyof T> = NonNullable<T[K]>;

/** Berth's error body: `{"error": "<message>", "status": "error"}`. */
export interface ErrorBody extends Schema<'ErrorBody'> {}

// Runs
/** The body of POST /run and POST /run/async. */
export interface RunRequest extends Body<'/run', 'post'> {}
/** The answer of POST /run. */
export interface RunResponse extends Answer<'/run', 'post'> {}
/** Token counts and estimated cost of a run's session. */
export interface RunUsage extends Field<RunResponse, 'usage'> {}
/** The body of POST /run/async (a RunRequest, with `webhook_url` useful here). */
export interface AsyncRunRequest extends Body<'/run/async', 'post'> {}
/** The answer of POST /run/async. */
export interface AsyncRunResponse extends Answer<'/run/async', 'post'> {}
/** The query of GET /run/stream. */
export interface StreamRequest extends Query<'/run/stream', 'get'> {}
/** A run request's `container`: image, limits, volumes, secrets, hooks, compose environment, egress. */
export interface ContainerOptions extends Field<RunRequest, 'container'> {}
/**
 * A run's `container.network`: which hosts it may reach through Berth's egress proxy. `none`: none;
 * `allowlist` (the default): only `allow` (`"pypi.org"`, `"*.npmjs.org"`, `"host:8443"`); `open`: any public
 * host, where the server allows it. The model gateway is reachable in every mode.
 */
export interface NetworkPolicy extends Field<ContainerOptions, 'network'> {}
export type NetworkMode = NonNullable<NetworkPolicy['mode']>;

/** One frame of GET /run/stream. */
export type RunStreamFrame =
  /** A piece of assistant text, as the engine produces it. */
  | { type: 'output'; content: string }
  /** The run completed; resume `session_id` to continue it. */
  | { type: 'done'; session_id: string; id: string }
  /** The run failed after the stream had started. */
  | { type: 'error'; error: string };

// Jobs
/** A job, as GET /jobs/{id} answers it. */
export interface Job extends Answer<'/jobs/{id}', 'get'> {}
export type JobStatus = Job['status'];
/** One event of GET /jobs/{id}/stream: a status the job took, the notice of events no longer kept, or the end. */
export interface JobEvent {
  type: 'status' | 'events_lost' | 'closed';
  /** `status`: the job's status from then on. */
  status?: JobStatus;
  /** `status`: why it did not complete (failed, crashed, cancelled). */
  error?: string;
  at?: string;
  /** Its id in Berth's event log; `events()` reconnects with the last one. Absent on `closed`, `events_lost`. */
  id?: number;
  /** `events_lost`: the last id this stream had when it asked to resume. */
  after?: number;
  /** `events_lost`: the newest id among the events Berth no longer keeps. */
  lost_through?: number;
}
/** Why a crashed job ended. */
export interface CrashInfo extends Field<Job, 'crash_info'> {}
/** The answer of GET /jobs. */
export interface JobList extends Answer<'/jobs', 'get'> {}
/** A job as listed by GET /jobs. */
export interface JobSummary extends Element<JobList['jobs']> {}
/** The query of GET /jobs. */
export interface JobQuery extends Query<'/jobs', 'get'> {}
/** The answer of DELETE /jobs/{id}. */
export interface CancelledJob extends Answer<'/jobs/{id}', 'delete'> {}

// Sessions
/** The answer of GET /sessions. */
export interface SessionList extends Answer<'/sessions', 'get'> {}
export interface Session extends Element<SessionList['sessions']> {}
/** The answer of GET /sessions/{id}/messages. */
export interface MessagePage extends Answer<'/sessions/{id}/messages', 'get'> {}
export interface Message extends Answer<'/sessions/{id}/messages/{message_id}', 'get'> {}
/** The query of GET /sessions/{id}/messages. */
export interface MessageQuery extends Query<'/sessions/{id}/messages', 'get'> {}
/** The answer of DELETE /sessions/{id}. */
export interface DeletedSession extends Answer<'/sessions/{id}', 'delete'> {}

// Agents
/** An agent's snapshot. */
export interface Agent extends Answer<'/agents/{id}', 'get'> {}
export type AgentStatus = Agent['status'];
/** The answer of GET /agents. */
export interface AgentList extends Answer<'/agents', 'get'> {}
/** The body of POST /agents. */
export interface SpawnRequest extends Body<'/agents', 'post'> {}
/** The answer of POST /agents/{id}/send. */
export interface SentTurn extends Answer<'/agents/{id}/send', 'post'> {}

/** The kinds of event on an agent's stream. */
export type AgentEventType = 'turn_start' | 'output' | 'turn_end' | 'error' | 'exited' | 'closed' | 'events_lost';

/** One event of GET /agents/{id}/stream. */
export interface AgentEvent {
  type: AgentEventType;
  /** The turn it belongs to (absent on `closed`). */
  turn_id?: string;
  /**
   * `output`: one line the engine printed (stream-json), verbatim; `error`: the text; `exited`: why the
   * agent stopped.
   */
  content?: string;
  /** When it happened (ISO 8601; absent on `closed`). */
  at?: string;
  /**
   * Its id in Berth's event log (the SSE `id:` line): ids grow; `events()` reconnects with the last one it
   * got, so Berth sends what was missed. Absent on `closed` and `events_lost`.
   */
  id?: number;
  /** `events_lost`: the last id this stream had when it asked to resume. */
  after?: number;
  /** `events_lost`: the newest id among the events Berth no longer keeps (SERVICE_EVENTS_MAX_PER_STREAM, SERVICE_EVENTS_MAX_AGE). */
  lost_through?: number;
}

// Images
/** A local image with its compatibility rank. */
export interface Image extends Answer<'/images/{name}', 'get'> {}
/** The answer of GET /images. */
export interface ImageList extends Answer<'/images', 'get'> {}
/** The answer of GET /images/search. */
export interface ImageSearchResults extends Answer<'/images/search', 'get'> {}
export interface ImageSearchResult extends Element<ImageSearchResults['results']> {}
/** The body of POST /images/pull. */
export interface PullRequest extends Body<'/images/pull', 'post'> {}
/** The answer of POST /images/pull. */
export interface PullResult extends Answer<'/images/pull', 'post'> {}

/** One frame of POST /images/pull streamed as Server-Sent Events (`Accept: text/event-stream`). */
export type PullStreamFrame =
  /** One line of Podman's report. `blobs_done` is present once every blob (layer) has been copied. */
  | { type: 'progress'; message: string; blobs_started: number; blobs_done?: number }
  /** The image is there: the fields of the JSON answer. */
  | ({ type: 'done' } & PullResult)
  /** The pull failed: the text and HTTP status the JSON answer would have had. */
  | { type: 'error'; error: string; status?: number };

/**
 * How a pull is going: `started` when it is sent, then `progress` for each line Berth reports ("Copying
 * blob sha256:…"), then `done` with the answer. Podman says when a blob's copy starts, not when it ends, nor
 * how many there are: `blobs_started` counts the blobs begun so far, and `blobs_done` appears once every
 * blob is copied.
 */
export type PullProgress =
  | { phase: 'started'; image: string; elapsed_ms: 0 }
  | { phase: 'progress'; image: string; elapsed_ms: number; message: string; blobs_started: number; blobs_done?: number }
  | { phase: 'done'; image: string; elapsed_ms: number; result: PullResult };

// Authentication
/** The answer of POST /auth/token and POST /auth/refresh. */
export interface TokenPair extends Answer<'/auth/token', 'post'> {}
/** The answer of POST /auth/validate. */
export interface TokenValidation extends Answer<'/auth/validate', 'post'> {}
/** The answer of POST /auth/logout. */
export interface LogoutResult extends Answer<'/auth/logout', 'post'> {}

// System
/** The answer of GET /health. */
export interface Health extends Answer<'/health', 'get'> {}
/** The answer of GET /version. */
export interface Version extends Answer<'/version', 'get'> {}
/** The answer of GET /claude/status. */
export interface ClaudeStatus extends Answer<'/claude/status', 'get'> {}
/** The answer of GET /secrets. */
export interface SecretList extends Answer<'/secrets', 'get'> {}

// Workspaces
/** A workspace, as GET /workspaces/{id} answers it and GET /workspaces lists it. */
export interface Workspace extends Answer<'/workspaces/{id}', 'get'> {}
export type WorkspaceSource = Workspace['source'];
/** The body of POST /workspaces: empty, or a git repository to clone. */
export interface WorkspaceCreateRequest extends Body<'/workspaces', 'post'> {}
/** The answer of GET /workspaces. */
export interface WorkspaceList extends Answer<'/workspaces', 'get'> {}
/** The answer of GET /workspaces/{id}/files/{path} for a directory. */
export interface WorkspaceDirectory extends Answer<'/workspaces/{id}/files/{*}', 'get'> {}
/** One entry of a directory listing. */
export interface WorkspaceEntry extends Element<WorkspaceDirectory['entries']> {}
/** The answer of PUT /workspaces/{id}/files/{path}. */
export interface UploadedFile extends Created<'/workspaces/{id}/files/{*}', 'put'> {}
/** The answer of POST /workspaces/{id}/archive. */
export interface ExtractedUpload extends Answer<'/workspaces/{id}/archive', 'post'> {}
/** The answer of GET /workspaces/{id}/diff. */
export interface WorkspaceDiff extends Answer<'/workspaces/{id}/diff', 'get'> {}
/** The checkpoints a diff compares with: before the last run began, or after the last upload or clone. */
export type WorkspaceDiffSince = WorkspaceDiff['since'];

// Usage (the model gateway's and the egress proxy's records)
/** The query of GET /usage: UTC dates, YYYY-MM-DD. */
export interface UsageQuery extends Query<'/usage', 'get'> {}
/** The answer of GET /usage: the caller's daily limits, today's totals, its usage by UTC day and by run. */
export interface UsageReport extends Answer<'/usage', 'get'> {}
/** One UTC day of a usage report. */
export interface UsageDay extends Element<UsageReport['days']> {}
/** One run of a usage report, with its totals. */
export interface UsageRun extends Element<UsageReport['runs']> {}
/** The answer of GET /usage/runs/{run_id}: one run's totals, model requests and egress decisions. */
export interface RunUsageReport extends Answer<'/usage/runs/{run_id}', 'get'> {}
/** One model request of a run, as the gateway recorded it. */
export interface ModelRequestRecord extends Element<RunUsageReport['requests']> {}
/** One decision of the egress proxy on a run's connection (a host reached, or refused and why). */
export interface EgressDecisionRecord extends Element<RunUsageReport['egress']> {}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call; it then rejects with the signal's reason (an `AbortError`). */
  signal?: AbortSignal;
}
