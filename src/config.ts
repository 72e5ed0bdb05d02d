// Every SERVICE_* variable, read once at start into one typed, frozen object.
// An invalid value stops the start with a message that names the variable.
import { availableParallelism, hostname } from 'node:os';
import { resolve } from 'node:path';
import { isIP } from 'node:net';
import { readFileSync } from 'node:fs';
import { parseCpus, parseDuration, parseMemory } from './units.js';
import { API_TOKEN_RULE, JWT_SECRET_RULE, secretWeakness } from './secret-strength.js';
import { ApiTokenEntryError, parseApiTokens, type ApiToken } from './api-tokens.js';
import { MAX_ALLOW_ENTRIES, parseHostPattern, patternCovered, type HostPattern } from './egress-policy.js';

export type LogFormat = 'json' | 'text';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type BlacklistBackendKind = 'memory' | 'bolt';
export type CredentialKind = 'api_key' | 'oauth_token';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export const SHUTDOWN_MODES = ['stop', 'drain', 'detach'] as const;
export type ShutdownMode = (typeof SHUTDOWN_MODES)[number];

export interface Config {
  readonly version: string;
  /** Names this Berth instance in container labels, so a restart reaps only its own leftovers. */
  readonly instanceName: string;
  readonly address: HostPort;
  readonly metricsAddress: HostPort;
  readonly logFormat: LogFormat;
  readonly logLevel: LogLevel;
  readonly dataDir: string;
  readonly podmanSocket: string | undefined;
  readonly maxBodyBytes: number;
  readonly maxPromptBytes: number;
  readonly maxConcurrentRuns: number;
  /** Agent containers at once (runs, streams, jobs, agents), in total and per caller. */
  readonly maxContainers: number;
  readonly maxContainersPerCaller: number;
  readonly agent: {
    readonly image: string;
    /** The engine image reference (SERVICE_ENGINE_IMAGE, or SERVICE_AGENT_CLI_IMAGE:SERVICE_AGENT_CLI_IMAGE_TAG). */
    readonly engineImage: string;
    /** Pull the engine image at start when it is missing. */
    readonly autoPullEngine: boolean;
    /** Mount the engine image at /opt/claude; false: run the engine the agent image contains. */
    readonly mountEngine: boolean;
    readonly sessionsDir: string;
    readonly sessionsHostDir: string;
    readonly workdirAutoCreate: boolean;
    readonly defaultWorkdir: string;
    readonly network: string;
    readonly allowedVolumes: readonly string[];
    readonly allowAllVolumes: boolean;
    readonly allowedImagePatterns: readonly string[];
    readonly defaultMemoryBytes: number;
    readonly defaultCpus: number;
    readonly defaultCpuShares: number;
    readonly defaultTimeoutMs: number;
    readonly maxMemoryBytes: number;
    /** Everything a run may write (its own file system: runtime/run-disk.ts): default and upper bound of container.disk. */
    readonly defaultDiskBytes: number;
    readonly maxDiskBytes: number;
    readonly maxCpus: number;
    readonly maxTimeoutMs: number;
    readonly pidsLimit: number;
    /** First host uid/gid of the user namespace agent containers run in (container id N is host id base + N). */
    readonly usernsBase: number;
    /** Largest log Podman keeps of any container Berth creates (older output is dropped beyond it). */
    readonly logMaxBytes: number;
    /** Whether volume options z/Z (SELinux relabelling of host files) are accepted. */
    readonly allowRelabel: boolean;
  };
  readonly engine: {
    /**
     * The model endpoint Berth's gateway forwards to (from the host, never from a container); undefined:
     * Anthropic's API, or the embedded offline model when no credential is configured.
     */
    readonly baseUrl: string | undefined;
    readonly credentialsFile: string | undefined;
    readonly credentialsSecret: string;
    readonly credentialKind: CredentialKind;
    readonly offlineModel: boolean;
    readonly offlineModelPort: number;
  };
  /** The model gateway and egress proxy agent containers reach (docs/egress.md). */
  readonly gateway: {
    /** Its one port on the agent network's gateway address (0: any free port, chosen at start). */
    readonly port: number;
  };
  /** Limits the gateway enforces per caller and UTC day; undefined: none. */
  readonly budgets: {
    readonly usdPerDay: number | undefined;
    readonly tokensPerDay: number | undefined;
  };
  /** What agent containers may reach through the egress proxy (egress-policy.ts). */
  readonly egress: {
    /** The allowlist of a request that gives none (empty: the model gateway only). */
    readonly defaultAllow: readonly HostPattern[];
    /** When set, every host a request allows must be covered by it; undefined: any public host may be asked for. */
    readonly allowedHosts: readonly HostPattern[] | undefined;
    /** Whether a request may ask for `open` (any public host). */
    readonly allowOpen: boolean;
    /**
     * Whether this host can hold containers to their policy (not an environment variable: startBerth sets it
     * false under rootless Podman, whose containers have a route out through slirp4netns; docs/egress.md).
     */
    readonly enforced: boolean;
  };
  readonly sessions: {
    readonly maxPageSize: number;
    /** Largest transcript a session keeps and Berth reads (the per-session storage cap). */
    readonly maxBytes: number;
  };
  readonly images: {
    /** Registries (host or host:port) pulled from and searched without TLS verification. */
    readonly insecureRegistries: readonly string[];
  };
  readonly jobs: {
    readonly retentionMs: number;
  };
  /**
   * What SIGTERM/SIGINT does to work in flight: `stop` cancels runs and agents and removes their containers;
   * `drain` refuses new work and waits (up to drainTimeoutMs) for runs, jobs and agent turns to end, then
   * stops; `detach` refuses new work and exits at once, leaving containers to the next start.
   */
  readonly shutdown: {
    readonly mode: ShutdownMode;
    readonly drainTimeoutMs: number;
  };
  /** Pre-started engines for runs and for persistent agents like the default request (core/pool). */
  readonly pool: {
    readonly size: number;
    readonly agentSize: number;
    readonly maxAgeMs: number;
    /**
     * How long claims must pause, with the host's CPUs idle at least half of it, before the pool starts the
     * engines it lacks (SERVICE_POOL_REFILL_PAUSE).
     */
    readonly refillPauseMs: number;
  };
  /** Compose environments (container.environment; docs/compose.md). */
  readonly compose: {
    /** Sidecar services may be privileged, add capabilities, devices or weakening security options. */
    readonly allowPrivileged: boolean;
    /** Sidecar services may use the host's network, PID or IPC namespace. */
    readonly allowHostNetwork: boolean;
    /** Services may bind-mount host paths (still only under SERVICE_AGENT_ALLOWED_VOLUMES). */
    readonly allowHostVolumes: boolean;
    readonly healthTimeoutMs: number;
    /** Default and upper bound of a request's build_timeout. */
    readonly buildTimeoutMs: number;
    /** A stack unused this long is removed. */
    readonly stackTtlMs: number;
    /** Remove the images a stack built when the stack is removed (false: the operator keeps them). */
    readonly removeBuiltImages: boolean;
    /** Stacks at once on this server. */
    readonly maxStacks: number;
    /** Stacks of one caller at once (each session has at most one). */
    readonly maxStacksPerCaller: number;
    /** `build:` in a compose file is allowed (confined builds; docs/compose.md). */
    readonly allowBuild: boolean;
    /** Upper bound of a build context's file data. */
    readonly maxContextBytes: number;
    /** The unprivileged system user whose rootless Podman runs builds (created when missing). */
    readonly buildUser: string;
    /** A stack's own file system: everything its services can write (runtime/stack-disk.ts, docs/disk.md). */
    readonly stackDiskBytes: number;
    /** A build's own file system: its sandbox with the images it reads and makes (runtime/podman/rootless-build.ts). */
    readonly buildDiskBytes: number;
  };
  /** Workspaces: the files a caller brings in and a session's work keeps (docs/workspaces.md). */
  readonly workspaces: {
    /** Size of each workspace's own file system (checkpoints included): a write past it fails with ENOSPC. */
    readonly maxBytes: number;
    /** Files a workspace may hold (uploads and archives are refused past it; its file system has room for three times as many, for checkpoints). */
    readonly maxFiles: number;
    /** A workspace unused this long is removed. */
    readonly ttlMs: number;
    /** Workspaces a caller creates with POST /workspaces (session-owned ones are not counted). */
    readonly maxPerCaller: number;
    /** An archive whose unpacked size exceeds its packed size by more than this factor is refused. */
    readonly maxArchiveRatio: number;
    /** The container uid and gid that own the files Berth writes into a workspace (the default images' user). */
    readonly fileOwnerUid: number;
    /** Files larger than this are listed by a diff but their content is neither kept in checkpoints nor diffed. */
    readonly diffMaxFileBytes: number;
    /** Time a git clone into a workspace may take. */
    readonly cloneTimeoutMs: number;
  };
  /** Persistent agents (docs/agents.md). */
  readonly agents: {
    /** Event streams one agent serves at once. */
    readonly maxSubscribers: number;
    /** Idle timeout when a spawn gives none (or 0). */
    readonly defaultIdleTimeoutSeconds: number;
    /** Interval of the idle watchdog. */
    readonly idleTickMs: number;
    /** How long an exited agent's record (and its exit_error) stays readable. */
    readonly exitedRetentionMs: number;
    /** How long a turn may wait for the engine to read it before the agent is stopped. */
    readonly sendTimeoutMs: number;
  };
  readonly webhooks: {
    readonly signingSecret: string;
    readonly maxRetries: number;
    readonly retryBaseDelayMs: number;
    readonly timeoutMs: number;
    /** Host names, IPs or CIDRs webhooks may target although internal. */
    readonly allowedHosts: readonly string[];
  };
  readonly tracing: {
    /** OTLP/HTTP traces endpoint (e.g. https://collector:4318/v1/traces); undefined: tracing off. */
    readonly endpoint: string | undefined;
    readonly sampleRatio: number;
  };
  readonly sse: {
    readonly heartbeatMs: number;
    /** Unread bytes a client may leave buffered before its stream is closed. */
    readonly maxBufferedBytes: number;
    /** Open event streams on the whole server. */
    readonly maxStreams: number;
  };
  /** The replayable event log (store/events, docs/streaming.md): what a reconnecting client can be sent again. */
  readonly events: {
    /** Events kept per agent or job. */
    readonly maxPerStream: number;
    /** Bytes of events kept per agent or job. */
    readonly maxBytesPerStream: number;
    /** Events older than this are pruned. */
    readonly maxAgeMs: number;
  };
  readonly auth: {
    readonly enabled: boolean;
    readonly jwtSecret: string;
    /** SERVICE_API_TOKENS: each token with the identity (`sub`) of the callers it signs in (api-tokens.ts). */
    readonly apiTokens: readonly ApiToken[];
    readonly accessTtlMs: number;
    readonly refreshTtlMs: number;
    readonly blacklistBackend: BlacklistBackendKind;
    readonly blacklistBoltPath: string;
    readonly blacklistCleanupIntervalMs: number;
  };
  /**
   * Where the stores live and which node this is (issue 26, docs/design/postgres-store.md). database undefined:
   * the embedded SQLite files under SERVICE_DATA_DIR, one node, exactly as before.
   */
  readonly cluster: {
    /** SERVICE_DATABASE_URL: a postgres:// URL shared by every node; undefined: embedded SQLite. */
    readonly databaseUrl: string | undefined;
    /** SERVICE_NODE_NAME: this node among those sharing the database (grants and agents are kept per node). */
    readonly nodeName: string;
    /** SERVICE_NODE_URL: how the other nodes reach this one's API. */
    readonly nodeUrl: string;
    /** SERVICE_NODE_LEASE: how long a node's registration lives without a heartbeat (sent every third of it). */
    readonly nodeLeaseMs: number;
    /**
     * SERVICE_SHARED_DIR: a directory every node mounts (NFS…), where each workspace is saved after each run so
     * that any node can restore it (core/workspaces/shared-workspaces.ts); only with SERVICE_DATABASE_URL.
     * Checked at start (exists, a directory, writable); undefined: workspaces stay on their node's disk.
     */
    readonly sharedDir: string | undefined;
  };
  readonly rateLimit: {
    readonly enabled: boolean;
    readonly rps: number;
    readonly burst: number;
    readonly trustedProxies: readonly string[];
  };
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

const PACKAGE = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
  optionalDependencies: Record<string, string>;
};
export const BERTH_VERSION = PACKAGE.version;
/** Container uids/gids 0–65535 are mapped into the host range starting at SERVICE_AGENT_USERNS_BASE. */
export const USERNS_SIZE = 65_536;
export const ENGINE_VERSION = PACKAGE.optionalDependencies['@anthropic-ai/claude-code-linux-x64'] ?? 'unknown';

/**
 * The engine image: SERVICE_AGENT_CLI_IMAGE (repository) and SERVICE_AGENT_CLI_IMAGE_TAG, or the whole
 * reference in SERVICE_ENGINE_IMAGE (a shorthand; giving both ways at once is refused as ambiguous).
 */
function engineImage(read: Reader): string {
  const whole = read.optional('SERVICE_ENGINE_IMAGE');
  const repository = read.optional('SERVICE_AGENT_CLI_IMAGE');
  const tag = read.optional('SERVICE_AGENT_CLI_IMAGE_TAG');
  if (whole !== undefined && (repository !== undefined || tag !== undefined)) {
    throw new ConfigError('SERVICE_ENGINE_IMAGE', 'is a shorthand for SERVICE_AGENT_CLI_IMAGE and SERVICE_AGENT_CLI_IMAGE_TAG; set either it or them, not both');
  }
  if (whole !== undefined) return whole;
  if (tag !== undefined && !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(tag)) throw new ConfigError('SERVICE_AGENT_CLI_IMAGE_TAG', `"${tag}" is not an image tag`);
  return `${repository ?? 'localhost/berth-engine'}:${tag ?? ENGINE_VERSION}`;
}

function atMostOne(name: string, value: number): number {
  if (value > 1) throw new ConfigError(name, `${value} is not a ratio between 0 and 1`);
  return value;
}

/**
 * The tracing endpoint, secure by default: https:// with the certificate verified; a plain http:// one only
 * when SERVICE_TRACING_INSECURE=true says the operator means it (spans would cross the network unprotected).
 */
function tracingEndpoint(endpoint: string | undefined, insecure: boolean): string | undefined {
  if (endpoint === undefined || endpoint === '') return undefined;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new ConfigError('SERVICE_TRACING_ENDPOINT', `"${endpoint}" is not a URL (for example https://collector:4318/v1/traces)`);
  }
  if (url.protocol === 'http:' && !insecure) {
    throw new ConfigError(
      'SERVICE_TRACING_ENDPOINT',
      `"${endpoint}" is plain http: spans would be sent unencrypted; use https://, or set SERVICE_TRACING_INSECURE=true to accept that`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('SERVICE_TRACING_ENDPOINT', `"${endpoint}" must be an http(s) URL`);
  return endpoint;
}

const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/**
 * SERVICE_DATABASE_URL and this node's identity. The node name defaults to `<host name>-<instance name>`:
 * unique across hosts (the host name) and among the instances of one host (which must differ already, their
 * containers are told apart by it). The node URL defaults to SERVICE_ADDRESS as http://, with a wildcard
 * address replaced by the host name (other nodes cannot reach 0.0.0.0).
 */
function clusterSettings(read: Reader): Config['cluster'] {
  const databaseUrl = read.optional('SERVICE_DATABASE_URL');
  if (databaseUrl !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(databaseUrl);
    } catch {
      url = undefined;
    }
    // The value is never echoed: it may hold a password.
    if (url === undefined || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')) {
      throw new ConfigError('SERVICE_DATABASE_URL', 'is not a postgres:// or postgresql:// URL (for example postgres://berth:secret@db.example:5432/berth)');
    }
    if (url.pathname.length <= 1) throw new ConfigError('SERVICE_DATABASE_URL', 'names no database (postgres://user:password@host:port/<database>)');
  }
  const instanceName = read.string('SERVICE_INSTANCE_NAME', 'default');
  const host = hostname().split('.')[0]!.replace(/[^A-Za-z0-9_.-]/g, '-') || 'localhost';
  const nodeName = read.string('SERVICE_NODE_NAME', `${host}-${instanceName}`.slice(0, 63));
  // The default is checked with SERVICE_INSTANCE_NAME (the host name's part is made of allowed characters).
  if (read.optional('SERVICE_NODE_NAME') !== undefined && !NODE_NAME.test(nodeName)) {
    throw new ConfigError('SERVICE_NODE_NAME', `"${nodeName}" must be 1-63 letters, digits, '.', '_' or '-'`);
  }
  const address = read.hostPort('SERVICE_ADDRESS', '127.0.0.1:8080');
  const reachableHost = address.host === '0.0.0.0' || address.host === '::' ? hostname() : address.host.includes(':') ? `[${address.host}]` : address.host;
  // Port 0 (any free port) is known only once listening: other nodes could not be told where this one is.
  if (databaseUrl !== undefined && address.port === 0 && read.optional('SERVICE_NODE_URL') === undefined) {
    throw new ConfigError('SERVICE_NODE_URL', 'cannot be derived from SERVICE_ADDRESS with port 0 (any free port); set it, or a fixed port, with SERVICE_DATABASE_URL');
  }
  const nodeUrl = read.string('SERVICE_NODE_URL', `http://${reachableHost}:${address.port}`);
  let parsedNodeUrl: URL | undefined;
  try {
    parsedNodeUrl = new URL(nodeUrl);
  } catch {
    parsedNodeUrl = undefined;
  }
  if (parsedNodeUrl === undefined || (parsedNodeUrl.protocol !== 'http:' && parsedNodeUrl.protocol !== 'https:')) {
    throw new ConfigError('SERVICE_NODE_URL', `"${nodeUrl}" is not an http(s) URL (for example http://node-1.internal:8080)`);
  }
  const nodeLeaseMs = read.duration('SERVICE_NODE_LEASE', '15s');
  // Heartbeats go every third of the lease: below 3 s a busy database or event loop would lose it.
  if (nodeLeaseMs < 3_000) throw new ConfigError('SERVICE_NODE_LEASE', `"${read.optional('SERVICE_NODE_LEASE')}" is below the minimum of 3s`);
  const sharedDir = read.optional('SERVICE_SHARED_DIR');
  if (sharedDir !== undefined && !sharedDir.startsWith('/')) throw new ConfigError('SERVICE_SHARED_DIR', `"${sharedDir}" is not an absolute path`);
  // Which node last held a workspace, and which saved copy is current, is in the shared database's index.
  if (sharedDir !== undefined && databaseUrl === undefined) throw new ConfigError('SERVICE_SHARED_DIR', 'needs SERVICE_DATABASE_URL (the shared database says which saved copy of a workspace is current)');
  return { databaseUrl, nodeName, nodeUrl: nodeUrl.replace(/\/+$/, ''), nodeLeaseMs, sharedDir };
}

/** Why a JWT secret is guessable, or undefined (kept for callers of the older name). */
export function isWeakJwtSecret(secret: string): string | undefined {
  return secretWeakness(secret, JWT_SECRET_RULE);
}

class Reader {
  constructor(private readonly env: Env) {}

  string(name: string, fallback: string): string {
    const value = this.env[name];
    return value === undefined || value === '' ? fallback : value;
  }

  optional(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const value = this.string(name, fallback);
    if (!(allowed as readonly string[]).includes(value)) {
      throw new ConfigError(name, `"${value}" is not one of ${allowed.join(', ')}`);
    }
    return value as T;
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    if (/^(true|1|yes)$/i.test(value)) return true;
    if (/^(false|0|no)$/i.test(value)) return false;
    throw new ConfigError(name, `"${value}" is not a boolean (true or false)`);
  }

  int(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    if (!/^-?\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new ConfigError(name, `"${value}" is not a whole number between ${min} and ${max}`);
    }
    return Number(value);
  }

  number(name: string, fallback: number, min: number): number {
    const value = this.optional(name);
    if (value === undefined) return fallback;
    const parsed = Number(value);
    if (!/^\d+(\.\d+)?$/.test(value) || parsed < min) throw new ConfigError(name, `"${value}" is not a number ≥ ${min}`);
    return parsed;
  }

  duration(name: string, fallback: string): number {
    const value = this.string(name, fallback);
    const ms = parseDuration(value);
    if (ms === undefined) throw new ConfigError(name, `"${value}" is not a duration such as 30s, 5m, 1h or 7d`);
    return ms;
  }

  memory(name: string, fallback: string): number {
    const value = this.string(name, fallback);
    const bytes = parseMemory(value);
    if (bytes === undefined) throw new ConfigError(name, `"${value}" is not a memory size such as 512m or 2g`);
    return bytes;
  }

  cpus(name: string, fallback: string): number {
    const value = this.string(name, fallback);
    const cpus = parseCpus(value);
    if (cpus === undefined) throw new ConfigError(name, `"${value}" is not a CPU count such as 0.5 or 2`);
    return cpus;
  }

  /**
   * Host names, IP addresses and CIDRs (`10.0.0.0/8`), each checked. A name whose last label is a number
   * (`1.2.3`, `010.0.0.1`) is refused: URLs read it as an IPv4 address, so it would never match by name.
   */
  hostList(name: string): string[] {
    const entries = this.list(name);
    for (const entry of entries) {
      const [address, prefix, extra] = entry.split('/');
      const family = isIP(address ?? '');
      const validPrefix = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
      const hostName =
        family === 0 &&
        prefix === undefined &&
        /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(entry) &&
        !/(^|\.)(\d+|0x[0-9a-f]*)$/i.test(entry);
      if (extra !== undefined || entry.includes('%') || !(hostName || (family !== 0 && validPrefix))) {
        throw new ConfigError(name, `"${entry}" is neither a host name, an IP address nor a CIDR like 10.0.0.0/8`);
      }
    }
    return entries;
  }

  /** A number when set; undefined when unset or empty. */
  optionalNumber(name: string, min: number): number | undefined {
    return this.optional(name) === undefined ? undefined : this.number(name, 0, min);
  }

  optionalInt(name: string, min: number): number | undefined {
    return this.optional(name) === undefined ? undefined : this.int(name, 0, min);
  }

  /** Egress host patterns (egress-policy.ts), comma-separated; undefined when unset or empty. */
  hostPatterns(name: string): HostPattern[] | undefined {
    const entries = this.list(name);
    if (entries.length === 0) return undefined;
    if (entries.length > MAX_ALLOW_ENTRIES) throw new ConfigError(name, `has ${entries.length} entries; at most ${MAX_ALLOW_ENTRIES}`);
    return entries.map((entry) => {
      const pattern = parseHostPattern(entry);
      if (typeof pattern === 'string') throw new ConfigError(name, pattern);
      return pattern;
    });
  }

  list(name: string): string[] {
    return (this.env[name] ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  }

  hostPort(name: string, fallback: string): HostPort {
    const value = this.string(name, fallback);
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(value);
    const port = match ? Number(match[3]) : NaN;
    if (!match || port > 65535) throw new ConfigError(name, `"${value}" is not an address of the form host:port`);
    return { host: match[1] ?? match[2]!, port };
  }

  absolutePath(name: string, fallback: string): string {
    return resolve(this.string(name, fallback));
  }
}

export function loadConfig(env: Env = process.env): Config {
  const read = new Reader(env);
  const dataDir = read.absolutePath('SERVICE_DATA_DIR', '.service/data');
  const sessionsDir = read.absolutePath('SERVICE_AGENT_SESSIONS_DIR', '.service/sessions');
  const machineCpus = availableParallelism();

  const defaultMemoryBytes = read.memory('SERVICE_AGENT_DEFAULT_MEMORY', '512m');
  const maxMemoryBytes = read.memory('SERVICE_AGENT_MAX_MEMORY', '8g');
  if (defaultMemoryBytes > maxMemoryBytes) throw new ConfigError('SERVICE_AGENT_DEFAULT_MEMORY', 'is larger than SERVICE_AGENT_MAX_MEMORY');
  const defaultDiskBytes = read.memory('SERVICE_AGENT_DEFAULT_DISK', '2g');
  const maxDiskBytes = read.memory('SERVICE_AGENT_MAX_DISK', '20g');
  if (defaultDiskBytes > maxDiskBytes) throw new ConfigError('SERVICE_AGENT_DEFAULT_DISK', 'is larger than SERVICE_AGENT_MAX_DISK');
  const defaultTimeoutMs = read.duration('SERVICE_AGENT_DEFAULT_TIMEOUT', '30m');
  const maxTimeoutMs = read.duration('SERVICE_AGENT_MAX_TIMEOUT', '4h');
  if (defaultTimeoutMs > maxTimeoutMs) throw new ConfigError('SERVICE_AGENT_DEFAULT_TIMEOUT', 'is longer than SERVICE_AGENT_MAX_TIMEOUT');
  const maxCpus = read.cpus('SERVICE_AGENT_MAX_CPUS', String(machineCpus));

  const authEnabled = read.bool('SERVICE_AUTH_ENABLED', true);
  const jwtSecret = read.string('SERVICE_JWT_SECRET', '');
  if (authEnabled) {
    const weakness = isWeakJwtSecret(jwtSecret);
    if (weakness) throw new ConfigError('SERVICE_JWT_SECRET', `${weakness} (or set SERVICE_AUTH_ENABLED=false for local development)`);
  }
  const apiTokenEntries = read.list('SERVICE_API_TOKENS');
  let apiTokens: ApiToken[];
  try {
    apiTokens = parseApiTokens(apiTokenEntries);
  } catch (error) {
    if (error instanceof ApiTokenEntryError) throw new ConfigError('SERVICE_API_TOKENS', error.message);
    throw error;
  }
  if (authEnabled) {
    for (const [index, { token }] of apiTokens.entries()) {
      const weakness = secretWeakness(token, API_TOKEN_RULE);
      // The token itself is never echoed: only its position in the list.
      if (weakness) throw new ConfigError('SERVICE_API_TOKENS', `token ${index + 1} of ${apiTokens.length} ${weakness}`);
    }
  }

  const config: Config = {
    version: BERTH_VERSION,
    instanceName: read.string('SERVICE_INSTANCE_NAME', 'default'),
    address: read.hostPort('SERVICE_ADDRESS', '127.0.0.1:8080'),
    metricsAddress: read.hostPort('SERVICE_METRICS_ADDRESS', '127.0.0.1:9090'),
    logFormat: read.oneOf('SERVICE_LOG_FORMAT', ['json', 'text'], 'json'),
    logLevel: read.oneOf('SERVICE_LOG_LEVEL', ['debug', 'info', 'warn', 'error'], 'info'),
    dataDir,
    podmanSocket: read.optional('SERVICE_PODMAN_SOCKET'),
    maxBodyBytes: read.int('SERVICE_MAX_BODY_BYTES', 2 * 1024 * 1024, 1024),
    maxPromptBytes: read.int('SERVICE_MAX_PROMPT_BYTES', 1024 * 1024, 1),
    maxConcurrentRuns: read.int('SERVICE_MAX_CONCURRENT_RUNS', Math.max(2, machineCpus), 1, 1000),
    maxContainers: read.int('SERVICE_MAX_CONTAINERS', 64, 1, 100_000),
    maxContainersPerCaller: read.int('SERVICE_MAX_CONTAINERS_PER_CALLER', 16, 1, 100_000),
    agent: {
      image: read.string('SERVICE_AGENT_IMAGE', `localhost/berth-agent:${BERTH_VERSION}`),
      engineImage: engineImage(read),
      autoPullEngine: read.bool('SERVICE_AGENT_AUTO_PULL_CLI', false),
      mountEngine: read.bool('SERVICE_AGENT_MOUNT_CLAUDE_CLI', true),
      sessionsDir,
      sessionsHostDir: read.absolutePath('SERVICE_AGENT_SESSIONS_HOST_DIR', sessionsDir),
      workdirAutoCreate: read.bool('SERVICE_AGENT_WORKDIR_AUTO_CREATE', true),
      defaultWorkdir: read.string('SERVICE_AGENT_DEFAULT_WORKDIR', '/workspace'),
      // Berth's own network with no route out, one per instance (its nftables rules name its bridge).
      network: read.string('SERVICE_AGENT_NETWORK', `berth-agents-${read.string('SERVICE_INSTANCE_NAME', 'default')}`),
      allowedVolumes: read.list('SERVICE_AGENT_ALLOWED_VOLUMES'),
      allowAllVolumes: read.bool('SERVICE_AGENT_ALLOW_ALL_VOLUMES', false),
      allowRelabel: read.bool('SERVICE_AGENT_ALLOW_RELABEL', false),
      allowedImagePatterns: read.list('SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS'),
      defaultMemoryBytes,
      defaultCpus: read.cpus('SERVICE_AGENT_DEFAULT_CPUS', '1'),
      defaultCpuShares: read.int('SERVICE_AGENT_DEFAULT_CPU_SHARES', 1024, 2, 262144),
      defaultTimeoutMs,
      maxMemoryBytes,
      defaultDiskBytes,
      maxDiskBytes,
      maxCpus,
      maxTimeoutMs,
      pidsLimit: read.int('SERVICE_AGENT_PIDS_LIMIT', 512, 16, 1_000_000),
      // Above the subordinate ranges useradd hands out (100000–600100000), below 2^31 minus the range.
      usernsBase: read.int('SERVICE_AGENT_USERNS_BASE', 700_000_000, 65_536, 2_147_483_647 - USERNS_SIZE),
      logMaxBytes: read.memory('SERVICE_CONTAINER_LOG_MAX_BYTES', '16m'),
    },
    engine: {
      baseUrl: read.optional('SERVICE_ENGINE_BASE_URL'),
      credentialsFile: read.optional('SERVICE_ENGINE_CREDENTIALS_FILE'),
      credentialsSecret: read.string('SERVICE_ENGINE_CREDENTIALS_SECRET', 'berth-engine-credentials'),
      credentialKind: read.oneOf('SERVICE_ENGINE_CREDENTIAL_KIND', ['api_key', 'oauth_token'], 'api_key'),
      offlineModel: read.bool('SERVICE_OFFLINE_MODEL', true),
      offlineModelPort: read.int('SERVICE_OFFLINE_MODEL_PORT', 8787, 0, 65535),
    },
    gateway: {
      port: read.int('SERVICE_GATEWAY_PORT', 8788, 0, 65535),
    },
    budgets: {
      usdPerDay: read.optionalNumber('SERVICE_CALLER_BUDGET_USD_PER_DAY', 0),
      tokensPerDay: read.optionalInt('SERVICE_CALLER_TOKENS_PER_DAY', 0),
    },
    egress: {
      defaultAllow: read.hostPatterns('SERVICE_EGRESS_DEFAULT_ALLOW') ?? [],
      allowedHosts: read.hostPatterns('SERVICE_EGRESS_ALLOWED_HOSTS'),
      allowOpen: read.bool('SERVICE_EGRESS_ALLOW_OPEN', false),
      enforced: true,
    },
    sessions: {
      maxPageSize: read.int('SERVICE_SESSIONS_MAX_PAGE_SIZE', 500, 1, 100_000),
      maxBytes: read.memory('SERVICE_SESSIONS_MAX_BYTES', '64m'),
    },
    images: {
      insecureRegistries: read.list('SERVICE_IMAGE_INSECURE_REGISTRIES'),
    },
    jobs: {
      retentionMs: read.duration('SERVICE_JOB_RETENTION', '7d'),
    },
    shutdown: {
      mode: read.oneOf('SERVICE_SHUTDOWN_MODE', SHUTDOWN_MODES, 'stop'),
      drainTimeoutMs: read.duration('SERVICE_SHUTDOWN_DRAIN_TIMEOUT', '5m'),
    },
    pool: {
      size: read.int('SERVICE_POOL_SIZE', 4, 0, 64),
      agentSize: read.int('SERVICE_AGENT_POOL_SIZE', 1, 0, 64),
      maxAgeMs: read.duration('SERVICE_POOL_MAX_AGE', '10m'),
      refillPauseMs: read.duration('SERVICE_POOL_REFILL_PAUSE', '500ms'),
    },
    compose: {
      allowPrivileged: read.bool('SERVICE_COMPOSE_ALLOW_PRIVILEGED', false),
      allowHostNetwork: read.bool('SERVICE_COMPOSE_ALLOW_HOST_NETWORK', false),
      allowHostVolumes: read.bool('SERVICE_COMPOSE_ALLOW_HOST_VOLUMES', false),
      healthTimeoutMs: read.duration('SERVICE_COMPOSE_HEALTH_TIMEOUT', '5m'),
      buildTimeoutMs: read.duration('SERVICE_COMPOSE_BUILD_TIMEOUT', '15m'),
      stackTtlMs: read.duration('SERVICE_COMPOSE_STACK_TTL', '1h'),
      removeBuiltImages: read.bool('SERVICE_COMPOSE_REMOVE_BUILT_IMAGES', true),
      maxStacks: read.int('SERVICE_COMPOSE_MAX_STACKS', 16, 1, 10_000),
      maxStacksPerCaller: read.int('SERVICE_COMPOSE_MAX_STACKS_PER_CALLER', 2, 1, 10_000),
      allowBuild: read.bool('SERVICE_COMPOSE_ALLOW_BUILD', false),
      maxContextBytes: read.memory('SERVICE_COMPOSE_MAX_CONTEXT_BYTES', '256m'),
      buildUser: read.string('SERVICE_COMPOSE_BUILD_USER', 'berth-build'),
      stackDiskBytes: read.memory('SERVICE_COMPOSE_STACK_DISK', '4g'),
      buildDiskBytes: read.memory('SERVICE_COMPOSE_BUILD_DISK', '8g'),
    },
    workspaces: {
      maxBytes: read.memory('SERVICE_WORKSPACE_MAX_BYTES', '2g'),
      maxFiles: read.int('SERVICE_WORKSPACE_MAX_FILES', 100_000, 100, 10_000_000),
      ttlMs: read.duration('SERVICE_WORKSPACE_TTL', '7d'),
      maxPerCaller: read.int('SERVICE_WORKSPACE_MAX_PER_CALLER', 50, 1, 100_000),
      maxArchiveRatio: read.number('SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO', 100, 1),
      fileOwnerUid: read.int('SERVICE_WORKSPACE_FILE_OWNER_UID', 1000, 0, USERNS_SIZE - 1),
      diffMaxFileBytes: read.memory('SERVICE_WORKSPACE_DIFF_MAX_FILE_BYTES', '1m'),
      cloneTimeoutMs: read.duration('SERVICE_WORKSPACE_CLONE_TIMEOUT', '5m'),
    },
    agents: {
      maxSubscribers: read.int('SERVICE_AGENT_MAX_SUBSCRIBERS', 8, 1, 10_000),
      defaultIdleTimeoutSeconds: Math.max(1, Math.round(read.duration('SERVICE_AGENT_IDLE_TIMEOUT', '30m') / 1000)),
      idleTickMs: Math.max(10, read.duration('SERVICE_AGENT_IDLE_TICK', '30s')),
      exitedRetentionMs: read.duration('SERVICE_AGENT_EXITED_RETENTION', '5m'),
      sendTimeoutMs: Math.max(100, read.duration('SERVICE_AGENT_SEND_TIMEOUT', '30s')),
    },
    webhooks: {
      signingSecret: read.string('SERVICE_WEBHOOK_SIGNING_SECRET', ''),
      maxRetries: read.int('SERVICE_WEBHOOK_MAX_RETRIES', 5, 0, 50),
      retryBaseDelayMs: read.duration('SERVICE_WEBHOOK_RETRY_BASE_DELAY', '1s'),
      timeoutMs: read.duration('SERVICE_WEBHOOK_TIMEOUT', '10s'),
      allowedHosts: read.hostList('SERVICE_WEBHOOK_ALLOWED_HOSTS'),
    },
    tracing: {
      endpoint: tracingEndpoint(read.optional('SERVICE_TRACING_ENDPOINT'), read.bool('SERVICE_TRACING_INSECURE', false)),
      sampleRatio: atMostOne('SERVICE_TRACING_SAMPLE_RATIO', read.number('SERVICE_TRACING_SAMPLE_RATIO', 1, 0)),
    },
    sse: {
      heartbeatMs: read.duration('SERVICE_SSE_HEARTBEAT_INTERVAL', '15s'),
      maxBufferedBytes: read.memory('SERVICE_SSE_MAX_BUFFER', '4m'),
      maxStreams: read.int('SERVICE_SSE_MAX_STREAMS', 512, 1, 1_000_000),
    },
    events: {
      maxPerStream: read.int('SERVICE_EVENTS_MAX_PER_STREAM', 5_000, 1, 10_000_000),
      maxBytesPerStream: read.memory('SERVICE_EVENTS_MAX_BYTES_PER_STREAM', '64m'),
      maxAgeMs: read.duration('SERVICE_EVENTS_MAX_AGE', '24h'),
    },
    auth: {
      enabled: authEnabled,
      jwtSecret,
      apiTokens,
      accessTtlMs: read.duration('SERVICE_JWT_EXPIRY', '24h'),
      refreshTtlMs: read.duration('SERVICE_JWT_REFRESH_EXPIRY', '7d'),
      blacklistBackend: read.oneOf('SERVICE_AUTH_BLACKLIST_BACKEND', ['memory', 'bolt'], 'memory'),
      blacklistBoltPath: read.absolutePath('SERVICE_AUTH_BLACKLIST_BOLT_PATH', resolve(dataDir, 'blacklist.db')),
      blacklistCleanupIntervalMs: read.duration('SERVICE_AUTH_BLACKLIST_CLEANUP_INTERVAL', '1h'),
    },
    cluster: clusterSettings(read),
    rateLimit: {
      enabled: read.bool('SERVICE_RATE_LIMIT_ENABLED', true),
      rps: read.number('SERVICE_RATE_LIMIT_RPS', 10, 0.001),
      burst: read.int('SERVICE_RATE_LIMIT_BURST', 20, 1),
      trustedProxies: read.list('SERVICE_RATE_LIMIT_TRUSTED_PROXIES'),
    },
  };
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(config.instanceName)) {
    throw new ConfigError('SERVICE_INSTANCE_NAME', `"${config.instanceName}" must be 1-63 letters, digits, '.', '_' or '-'`);
  }
  for (const registry of config.images.insecureRegistries) {
    if (!/^[A-Za-z0-9.-]+(?::\d{1,5})?$|^\[[0-9a-fA-F:]+\](?::\d{1,5})?$/.test(registry)) {
      throw new ConfigError('SERVICE_IMAGE_INSECURE_REGISTRIES', `"${registry}" is not a registry host such as registry.example:5000`);
    }
  }
  // When Berth runs in a container, the host path of its sessions directory must also be an
  // allowed volume (an operator who sets it states where the sessions are, and allows exactly that tree).
  const hostDir = config.agent.sessionsHostDir;
  if (read.optional('SERVICE_AGENT_SESSIONS_HOST_DIR') !== undefined && !config.agent.allowAllVolumes
    && !config.agent.allowedVolumes.some((v) => hostDir === v.replace(/\/+$/, '') || hostDir.startsWith(`${v.replace(/\/+$/, '')}/`))) {
    throw new ConfigError('SERVICE_AGENT_SESSIONS_HOST_DIR', `"${hostDir}" must also be in SERVICE_AGENT_ALLOWED_VOLUMES (or under one of its entries)`);
  }
  for (const volume of config.agent.allowedVolumes) {
    if (!volume.startsWith('/')) throw new ConfigError('SERVICE_AGENT_ALLOWED_VOLUMES', `"${volume}" is not an absolute path`);
  }
  // conmon refuses a log cap under 8 KiB; 64 KiB keeps a few of the engine's lines.
  if (config.agent.logMaxBytes < 64 * 1024) {
    throw new ConfigError('SERVICE_CONTAINER_LOG_MAX_BYTES', `"${read.optional('SERVICE_CONTAINER_LOG_MAX_BYTES')}" is below the minimum of 64k`);
  }
  // A disk smaller than this is mostly its own file system's metadata (runtime/run-disk.ts).
  for (const [name, bytes] of [['SERVICE_COMPOSE_STACK_DISK', config.compose.stackDiskBytes], ['SERVICE_COMPOSE_BUILD_DISK', config.compose.buildDiskBytes], ['SERVICE_WORKSPACE_MAX_BYTES', config.workspaces.maxBytes]] as const) {
    if (bytes < 64 * 1024 ** 2) throw new ConfigError(name, `"${read.optional(name)}" is below the minimum of 64m`);
  }
  // The default list is the operator's own; it must pass the operator's own limit too.
  const { allowedHosts, defaultAllow } = config.egress;
  for (const pattern of allowedHosts ? defaultAllow : []) {
    if (!patternCovered(allowedHosts!, pattern)) {
      throw new ConfigError('SERVICE_EGRESS_DEFAULT_ALLOW', `"${pattern.text}" is not covered by SERVICE_EGRESS_ALLOWED_HOSTS`);
    }
  }
  // Passed to useradd/runuser: a plain system user name, never an option.
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(config.compose.buildUser)) {
    throw new ConfigError('SERVICE_COMPOSE_BUILD_USER', `"${config.compose.buildUser}" is not a user name (lower-case letters, digits, "_" and "-", at most 32)`);
  }
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
