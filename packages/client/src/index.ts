// @berth/client: a typed client for Berth's HTTP API, for Node 20+ and browsers (it uses only fetch).
//
//   const berth = new Berth({ url: 'http://127.0.0.1:8080', apiToken: process.env.BERTH_API_TOKEN });
//   const { output, session_id } = await berth.run({ prompt: 'say: hi' });
//
// The Berth class wires the parts together: tokens.ts (access tokens), transport.ts (every request:
// tokens, rate limit, retries, errors), and one module per resource (runs, jobs, sessions, agents,
// images, workspaces, usage, auth, system). Request and response types come from Berth's OpenAPI document (types.ts).

import createClient from 'openapi-fetch';
import type { Api } from './api.js';
import { ApiVersionHandshake, type ApiVersionCheck } from './api-version.js';
import { Agents } from './agents.js';
import { Auth, tokenEndpoints } from './auth.js';
import type { paths } from './generated/openapi.js';
import { Images } from './images.js';
import { Jobs, type WaitForJobOptions } from './jobs.js';
import { Runs } from './runs.js';
import { Sessions } from './sessions.js';
import { System } from './system.js';
import { MemoryTokenStore, TokenManager, type TokenStore } from './tokens.js';
import { Transport } from './transport.js';
import { Usage } from './usage.js';
import { Workspaces } from './workspaces.js';
import type {
  AsyncRunRequest,
  AsyncRunResponse,
  CallOptions,
  ClaudeStatus,
  Health,
  Job,
  RunRequest,
  RunResponse,
  RunStreamFrame,
  SecretList,
  StreamRequest,
  Version,
} from './types.js';

export { BerthError, BerthNetworkError, isAbortError } from './errors.js';
export { API_VERSION, BerthVersionError, apiVersionsFit, type ApiVersionCheck } from './api-version.js';
export { MemoryTokenStore, REFRESH_MARGIN_MS, type TokenStore, type Tokens } from './tokens.js';
export { FINAL_JOB_STATUSES, type WaitForJobOptions } from './jobs.js';
export type { AgentEventsOptions } from './agents.js';
export type { FollowOptions } from './followed-events.js';
export type { PullOptions } from './images.js';
export { retryPolicy, type RetryPolicy } from './retry-policy.js';
export type * from './types.js';
export type { Agents, Auth, Images, Jobs, Sessions, Usage, Workspaces };
export type { DownloadOptions, UploadDirectoryOptions, WorkspacePathOptions } from './workspaces.js';
export type { UploadBody } from './request-body.js';
export type { PackOptions, PackPlan } from './local-tree-types.js';
export { UnsafeArchiveError, type ExtractedArchive } from './extract-archive.js';

export interface BerthOptions {
  /** Berth's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** An access token (JWT) to send as is; it is never refreshed. */
  accessToken?: string;
  /** An API token (one of the server's SERVICE_API_TOKENS), exchanged for an access token on first need. */
  apiToken?: string;
  /**
   * The `client_id` of that exchange: a label kept in the tokens (default `berth-client`). It does not choose
   * whom the tokens are for: their `sub`, the owner of everything created with them, is the API token's name.
   */
  clientId?: string;
  /**
   * Where access and refresh tokens are loaded from and saved to (a file for a CLI, sessionStorage for a
   * web page). Default: memory.
   */
  tokens?: TokenStore;
  /** The fetch to use. Default: the global fetch. */
  fetch?: typeof fetch;
  /** How often a failed request that may be repeated is sent again (see retry-policy.ts). Default 3. */
  retries?: number;
  /** Sent as User-Agent where the platform allows it (Node; browsers set their own). */
  userAgent?: string;
  /**
   * The version handshake: before its first call (but `version()` and `health()`) the client asks GET
   * /version and compares the server's api_version with its own API_VERSION (they fit when their major
   * versions are equal). `error` (default): a server that does not fit fails every call with a
   * BerthVersionError; `warn`: `onWarning` is told once and calls go on; `off`: no check.
   */
  apiVersionCheck?: ApiVersionCheck;
  /** Receives the handshake's warning in `warn` mode. Default: console.warn. */
  onWarning?: (message: string) => void;
}

/** A client of one Berth server. */
export class Berth {
  /** GET /jobs, GET and DELETE /jobs/{id}. */
  readonly jobs: Jobs;
  /** GET /sessions, /sessions/{id}/messages, DELETE /sessions/{id}. */
  readonly sessions: Sessions;
  /** Persistent agents: /agents. */
  readonly agents: Agents;
  /** /images. */
  readonly images: Images;
  /** /workspaces: file trees runs mount at their workdir; files, archives, diffs. */
  readonly workspaces: Workspaces;
  /** /usage: the caller's model usage by day and by run, one run's model requests and egress decisions. */
  readonly usage: Usage;
  /** /auth: token exchange, refresh, validation, logout. */
  readonly auth: Auth;
  /** Berth's base URL, without a trailing slash. */
  readonly url: string;

  private readonly runs: Runs;
  private readonly system: System;

  constructor(options: BerthOptions) {
    const clientId = options.clientId ?? 'berth-client';
    const userFetch = options.fetch ?? globalThis.fetch;
    // Called as a plain function: a browser's fetch refuses to run as a method of another object.
    const send: typeof fetch = (input, init) => userFetch(input, init);
    // The token calls travel through the transport like every other call, and the transport asks the
    // token manager for tokens: the client below reaches the transport only once it exists.
    let transport: Transport | undefined;
    const handshake = new ApiVersionHandshake({
      url: options.url.replace(/\/+$/, ''),
      mode: options.apiVersionCheck ?? 'error',
      serverApiVersion: async () => {
        const response = await transport!.fetch(new Request(`${transport!.baseUrl}/version`));
        const body = (await response.json().catch(() => undefined)) as { api_version?: unknown } | undefined;
        return typeof body?.api_version === 'string' ? body.api_version : undefined;
      },
      warn: options.onWarning ?? ((message) => console.warn(message)),
    });
    const basePath = new URL(options.url).pathname.replace(/\/+$/, '');
    const routeOf = (url: string) => new URL(url).pathname.slice(basePath.length);
    const api: Api = createClient<paths>({
      baseUrl: options.url,
      fetch: async (request) => {
        await handshake.before(routeOf(request.url), request.signal);
        return transport!.fetch(request);
      },
    });
    const tokens = new TokenManager({
      accessToken: options.accessToken,
      apiToken: options.apiToken,
      clientId,
      store: options.tokens ?? new MemoryTokenStore(),
      endpoints: tokenEndpoints(api),
    });
    transport = new Transport({ baseUrl: options.url, fetch: send, tokens, retries: options.retries ?? 3, userAgent: options.userAgent });
    this.url = transport.baseUrl;
    this.runs = new Runs(api);
    this.jobs = new Jobs(api);
    this.sessions = new Sessions(api);
    this.agents = new Agents(api);
    this.images = new Images(api);
    const raw = transport;
    this.workspaces = new Workspaces(api, async (path, init, replayable) => {
      const request = new Request(`${raw.baseUrl}${path}`, init);
      await handshake.before(routeOf(request.url), request.signal);
      return replayable ? raw.fetch(request) : raw.sendOnce(request);
    });
    this.usage = new Usage(api);
    this.auth = new Auth(api, tokens, clientId);
    this.system = new System(api);
  }

  /** Runs a prompt in a fresh container and answers when it has ended. Aborting stops the run. */
  run(request: RunRequest, options?: CallOptions): Promise<RunResponse> {
    return this.runs.run(request, options);
  }

  /** Queues a run as a job and answers at once with its job_id and session_id. */
  runAsync(request: AsyncRunRequest, options?: CallOptions): Promise<AsyncRunResponse> {
    return this.runs.runAsync(request, options);
  }

  /**
   * Polls a job until it has ended (completed, failed, crashed or cancelled) and answers it; the pause
   * between polls grows from `interval` to `maxInterval`.
   */
  waitForJob(id: string, options?: WaitForJobOptions): Promise<Job> {
    return this.jobs.wait(id, options);
  }

  /**
   * Runs a prompt and yields its frames as they come: `output` pieces, then `done` (or `error`).
   * Breaking out of the loop or aborting stops the run.
   */
  stream(request: StreamRequest, options?: CallOptions): AsyncIterable<RunStreamFrame> {
    return this.runs.stream(request, options);
  }

  /** GET /health (needs no token). */
  health(options?: CallOptions): Promise<Health> {
    return this.system.health(options);
  }

  /** GET /version (needs no token). */
  version(options?: CallOptions): Promise<Version> {
    return this.system.version(options);
  }

  /** GET /claude/status: whether runs can start. */
  claudeStatus(options?: CallOptions): Promise<ClaudeStatus> {
    return this.system.claudeStatus(options);
  }

  /** GET /secrets: names of the secrets a run may use in container.secrets_env. */
  secrets(options?: CallOptions): Promise<SecretList> {
    return this.system.secrets(options);
  }
}
