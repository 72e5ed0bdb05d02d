// The error catalogue: every error Berth answers with has a code here, an HTTP status and a message.
// Errors of dependencies (Podman, the engine, SQLite, JWT) are translated into these at one place each,
// and the HTTP layer turns a BerthError into {"error": message, "status": "error"}.
// docs/errors.md lists the same codes; test/unit/errors.test.ts checks that the two agree.

export const ERROR_STATUS = {
  BERTH_ERR_REQUEST_INVALID: 400,
  BERTH_ERR_REQUEST_TOO_LARGE: 413,
  BERTH_ERR_VALIDATION: 400,
  BERTH_ERR_IMAGE_MUSL: 400,
  BERTH_ERR_IMAGE_NO_GLIBC: 400,
  BERTH_ERR_IMAGE_NO_ENGINE: 400,
  BERTH_ERR_IMAGE_NOT_ALLOWED: 400,
  BERTH_ERR_IMAGE_NOT_FOUND: 400,
  BERTH_ERR_SECRET_NOT_FOUND: 400,
  BERTH_ERR_AUTH_TOKEN_REQUIRED: 401,
  BERTH_ERR_AUTH_INVALID_TOKEN: 401,
  BERTH_ERR_AUTH_TOKEN_EXPIRED: 401,
  BERTH_ERR_AUTH_TOKEN_BLACKLISTED: 401,
  BERTH_ERR_AUTH_INVALID_API_TOKEN: 401,
  BERTH_ERR_NOT_FOUND: 404,
  BERTH_ERR_SESSION_NOT_FOUND: 404,
  BERTH_ERR_JOB_NOT_FOUND: 404,
  BERTH_ERR_AGENT_NOT_FOUND: 404,
  BERTH_ERR_ROUTE_NOT_FOUND: 404,
  BERTH_ERR_METHOD_NOT_ALLOWED: 405,
  BERTH_ERR_WORKSPACE_NOT_FOUND: 404,
  BERTH_ERR_WORKSPACE_BUSY: 409,
  BERTH_ERR_WORKSPACE_FULL: 413,
  BERTH_ERR_WORKSPACES_PER_CALLER: 429,
  BERTH_ERR_WORKSPACE_CLONE_FAILED: 502,
  BERTH_ERR_RANGE_NOT_SATISFIABLE: 416,
  BERTH_ERR_SESSION_BUSY: 409,
  BERTH_ERR_JOB_FINISHED: 409,
  BERTH_ERR_AGENT_BUSY: 409,
  BERTH_ERR_AGENT_EXITED: 410,
  BERTH_ERR_RATE_LIMITED: 429,
  BERTH_ERR_BUDGET_EXCEEDED: 429,
  BERTH_ERR_CONTAINERS_PER_CALLER: 429,
  BERTH_ERR_AGENT_SUBSCRIBERS: 429,
  BERTH_ERR_RUN_FAILED: 500,
  BERTH_ERR_RUN_TIMEOUT: 500,
  BERTH_ERR_RUN_OOM: 500,
  BERTH_ERR_INTERNAL: 500,
  BERTH_ERR_AGENT_SPAWN_FAILED: 500,
  BERTH_ERR_IMAGE_PULL_FAILED: 502,
  BERTH_ERR_IMAGE_SEARCH_FAILED: 502,
  BERTH_ERR_ENGINE_NOT_CONFIGURED: 503,
  BERTH_ERR_RUNTIME_UNAVAILABLE: 503,
  BERTH_ERR_SHUTTING_DOWN: 503,
  BERTH_ERR_STORAGE_FULL: 503,
  BERTH_ERR_AGENT_NOT_READY: 503,
  BERTH_ERR_AUTH_BLACKLIST_UNAVAILABLE: 503,
  BERTH_ERR_AT_CAPACITY: 503,
  BERTH_ERR_STACKS_AT_CAPACITY: 503,
  BERTH_ERR_STACKS_PER_CALLER: 429,
  BERTH_ERR_STACK_FAILED: 500,
  BERTH_ERR_STREAMS_AT_CAPACITY: 503,
  BERTH_ERR_CONSOLE_NOT_BUILT: 503,
  BERTH_ERR_NODE_UNREACHABLE: 502,
  BERTH_ERR_NODE_UNAVAILABLE: 503,
  BERTH_ERR_SLOTS_UNAVAILABLE: 503,
  BERTH_ERR_AGENT_SEND_TIMEOUT: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class BerthError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'BerthError';
    this.status = ERROR_STATUS[code];
  }
}

/** Factories for the errors whose text is fixed or shaped by the catalogue (limits may be placeholders, for the API reference). */
export const errors = {
  invalid: (message: string) => new BerthError('BERTH_ERR_VALIDATION', message),
  badRequest: (message: string) => new BerthError('BERTH_ERR_REQUEST_INVALID', message),
  tooLarge: (message: string) => new BerthError('BERTH_ERR_REQUEST_TOO_LARGE', message),
  muslImage: (image: string) =>
    new BerthError(
      'BERTH_ERR_IMAGE_MUSL',
      `image "${image}" is Alpine/musl-based: Alpine/musl-based images are not supported, because the engine needs glibc; use a Debian, Ubuntu or other glibc-based image`,
    ),
  noGlibcImage: (image: string) =>
    new BerthError(
      'BERTH_ERR_IMAGE_NO_GLIBC',
      `image "${image}" has no glibc (no C library loader in its files, as in a FROM-scratch image): the engine needs glibc; use a Debian, Ubuntu or other glibc-based image`,
    ),
  engineNotInImage: (image: string) =>
    new BerthError(
      'BERTH_ERR_IMAGE_NO_ENGINE',
      `container.image "${image}" has no engine: this server runs the engine the image contains (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false), and no \`claude\` is on the image's PATH; use an image with Claude Code installed`,
    ),
  imageNotAllowed: (image: string, field = 'container.image') =>
    new BerthError('BERTH_ERR_IMAGE_NOT_ALLOWED', `${field} "${image}" is not allowed: it matches no pattern of SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS`),
  imageNotFound: (image: string) =>
    new BerthError('BERTH_ERR_IMAGE_NOT_FOUND', `container.image "${image}" is not present on this host; pull it first (POST /images/pull) or build it`),
  secretNotFound: (variable: string, secret: string) =>
    new BerthError('BERTH_ERR_SECRET_NOT_FOUND', `container.secrets_env.${variable}: secret "${secret}" does not exist in the Podman secret store`),
  gitSecretNotFound: (secret: string) =>
    new BerthError('BERTH_ERR_SECRET_NOT_FOUND', `git.secret: secret "${secret}" does not exist in the Podman secret store`),
  tokenRequired: () => new BerthError('BERTH_ERR_AUTH_TOKEN_REQUIRED', 'token required'),
  invalidToken: () => new BerthError('BERTH_ERR_AUTH_INVALID_TOKEN', 'invalid token'),
  tokenExpired: () => new BerthError('BERTH_ERR_AUTH_TOKEN_EXPIRED', 'token expired'),
  tokenBlacklisted: () => new BerthError('BERTH_ERR_AUTH_TOKEN_BLACKLISTED', 'token blacklisted'),
  invalidApiToken: () => new BerthError('BERTH_ERR_AUTH_INVALID_API_TOKEN', 'invalid token'),
  blacklistUnavailable: (why: string) =>
    new BerthError('BERTH_ERR_AUTH_BLACKLIST_UNAVAILABLE', `token blacklist unavailable: ${why}`),
  notFound: (what: string) => new BerthError('BERTH_ERR_NOT_FOUND', `${what} not found`),
  imageNotInRegistry: (image: string, registry: string) =>
    new BerthError('BERTH_ERR_NOT_FOUND', `image "${image}" not found: registry ${registry} has no such repository or tag`),
  sessionNotFound: (id: string) => new BerthError('BERTH_ERR_SESSION_NOT_FOUND', `session ${id} not found`),
  jobNotFound: (id: string) => new BerthError('BERTH_ERR_JOB_NOT_FOUND', `job ${id} not found`),
  routeNotFound: (method: string, url: string) => new BerthError('BERTH_ERR_ROUTE_NOT_FOUND', `no route ${method} ${url}`),
  mcpMethodNotAllowed: (method: string) =>
    new BerthError('BERTH_ERR_METHOD_NOT_ALLOWED', `${method} /mcp is not supported: Berth's MCP endpoint keeps no session (stateless streamable HTTP); send MCP messages with POST /mcp`),
  workspaceNotFound: (id: string) => new BerthError('BERTH_ERR_WORKSPACE_NOT_FOUND', `workspace ${id} not found`),
  workspaceBusy: (id: string) =>
    new BerthError('BERTH_ERR_WORKSPACE_BUSY', `workspace ${id} is in use by a run or an agent; retry when it has finished (an agent holds its workspace until it is deleted)`),
  workspaceFull: (id: string, what: string) =>
    new BerthError('BERTH_ERR_WORKSPACE_FULL', `workspace ${id} is full: ${what} (SERVICE_WORKSPACE_MAX_BYTES, SERVICE_WORKSPACE_MAX_FILES); nothing of this upload was written; delete files or use a new workspace`),
  workspacesPerCaller: (limit: number | string) =>
    new BerthError('BERTH_ERR_WORKSPACES_PER_CALLER', `too many workspaces: this caller already has ${limit} (SERVICE_WORKSPACE_MAX_PER_CALLER); delete one first`),
  rangeNotSatisfiable: (size: number | string) =>
    new BerthError('BERTH_ERR_RANGE_NOT_SATISFIABLE', `range not satisfiable: the file has ${size} bytes`),
  workspaceCloneFailed: (why: string) => new BerthError('BERTH_ERR_WORKSPACE_CLONE_FAILED', `git clone failed: ${why}`),
  sessionBusy: (id: string) =>
    new BerthError('BERTH_ERR_SESSION_BUSY', `session ${id} is in use by another run; retry when it has finished`),
  jobFinished: (id: string, status: string) =>
    new BerthError('BERTH_ERR_JOB_FINISHED', `job ${id} is already ${status} and cannot be cancelled`),
  /** A model budget is spent (core/gateway/budgets.ts): `message` names the limit, its value and what was used. */
  budgetExceeded: (message: string) => new BerthError('BERTH_ERR_BUDGET_EXCEEDED', `model budget reached: ${message}`),
  rateLimited: () => new BerthError('BERTH_ERR_RATE_LIMITED', 'rate limit exceeded; slow down and retry later'),
  tooManyContainers: (limit: number | string) =>
    new BerthError(
      'BERTH_ERR_CONTAINERS_PER_CALLER',
      `too many containers: this caller already has ${limit} runs, streams or agents running (SERVICE_MAX_CONTAINERS_PER_CALLER); retry when one has ended, or delete an agent`,
    ),
  tooManySubscribers: (id: string, limit: number | string) =>
    new BerthError('BERTH_ERR_AGENT_SUBSCRIBERS', `agent ${id} already has ${limit} event streams open (SERVICE_AGENT_MAX_SUBSCRIBERS); close one first`),
  streamsAtCapacity: (limit: number | string) =>
    new BerthError('BERTH_ERR_STREAMS_AT_CAPACITY', `server at capacity: ${limit} event streams are open (SERVICE_SSE_MAX_STREAMS); retry later`),
  atCapacity: (limit: number | string) =>
    new BerthError('BERTH_ERR_AT_CAPACITY', `server at capacity: ${limit} containers are running (SERVICE_MAX_CONTAINERS); retry later`),
  stacksAtCapacity: (limit: number | string) =>
    new BerthError('BERTH_ERR_STACKS_AT_CAPACITY', `server at capacity: ${limit} compose stacks exist (SERVICE_COMPOSE_MAX_STACKS); delete a session with a stack or retry later`),
  nodeUnreachable: (node: string, reason: string) =>
    new BerthError('BERTH_ERR_NODE_UNREACHABLE', `the request was forwarded to node ${node}, which runs what it names, and failed there: ${reason}; retry`),
  nodeUnavailable: (what: string, node: string) =>
    new BerthError('BERTH_ERR_NODE_UNAVAILABLE', `${what} runs on node ${node}, which holds no live lease (stopped, restarting or lost); retry once it is back, or once its loss has been handled`),
  slotsUnavailable: (reason: string) =>
    new BerthError('BERTH_ERR_SLOTS_UNAVAILABLE', `the caller's containers in the cluster cannot be counted (SERVICE_DATABASE_URL): ${reason}; retry later`),
  stacksPerCaller: (limit: number | string) =>
    new BerthError('BERTH_ERR_STACKS_PER_CALLER', `too many compose stacks: this caller's sessions already have ${limit} (SERVICE_COMPOSE_MAX_STACKS_PER_CALLER); delete a session with a stack or wait for its SERVICE_COMPOSE_STACK_TTL`),
  stackFailed: (message: string) => new BerthError('BERTH_ERR_STACK_FAILED', `compose environment: ${message}`),
  runFailed: (message: string) => new BerthError('BERTH_ERR_RUN_FAILED', message),
  runTimeout: (timeout: string) =>
    new BerthError('BERTH_ERR_RUN_TIMEOUT', `run timed out after ${timeout} (container.timeout); the container was removed`),
  runOom: (memory: string) =>
    new BerthError('BERTH_ERR_RUN_OOM', `run was killed for running out of memory (container.memory ${memory}); the container was removed`),
  internal: (message: string) => new BerthError('BERTH_ERR_INTERNAL', message),
  agentNotFound: (id: string) => new BerthError('BERTH_ERR_AGENT_NOT_FOUND', `agent ${id} not found`),
  agentBusy: (id: string) =>
    new BerthError('BERTH_ERR_AGENT_BUSY', `agent ${id} is generating a turn; send again after its turn_end event`),
  agentExited: (id: string, why: string) => new BerthError('BERTH_ERR_AGENT_EXITED', `agent ${id} has exited (${why}); spawn a new agent`),
  agentNotReady: (id: string) =>
    new BerthError('BERTH_ERR_AGENT_NOT_READY', `agent ${id} is still starting; retry when its status is idle`),
  agentSpawnFailed: (why: string) => new BerthError('BERTH_ERR_AGENT_SPAWN_FAILED', `agent spawn failed: ${why}`),
  agentSendTimeout: (id: string, timeout: string) =>
    new BerthError(
      'BERTH_ERR_AGENT_SEND_TIMEOUT',
      `agent ${id} did not take the turn within ${timeout} (SERVICE_AGENT_SEND_TIMEOUT): its engine is not reading its input (stopped or stuck); the agent was stopped, spawn a new one`,
    ),
  imagePullFailed: (image: string, why: string) =>
    new BerthError('BERTH_ERR_IMAGE_PULL_FAILED', `pulling image "${image}" failed: ${why}`),
  imageSearchFailed: (term: string, why: string) =>
    new BerthError('BERTH_ERR_IMAGE_SEARCH_FAILED', `searching registries for "${term}" failed: ${why}`),
  engineNotConfigured: (why: string) => new BerthError('BERTH_ERR_ENGINE_NOT_CONFIGURED', `engine not configured: ${why}`),
  consoleNotBuilt: () => new BerthError('BERTH_ERR_CONSOLE_NOT_BUILT', 'the web console is not built: run make setup'),
  shuttingDown: () =>
    new BerthError('BERTH_ERR_SHUTTING_DOWN', 'the service is shutting down and accepts no new work; retry once it has restarted'),
  runStoppedByShutdown: (sessionId: string) =>
    new BerthError(
      'BERTH_ERR_SHUTTING_DOWN',
      `the service is shutting down and stopped this run; session ${sessionId} keeps what the engine wrote: resume it once the service is back`,
    ),
  storageFull: (what: string) =>
    new BerthError('BERTH_ERR_STORAGE_FULL', `the ${what} cannot be written: its disk is full (SERVICE_DATA_DIR); retry once space is freed`),
  runtimeUnavailable: (why: string) =>
    new BerthError('BERTH_ERR_RUNTIME_UNAVAILABLE', `container runtime unavailable: ${why}`),
};
