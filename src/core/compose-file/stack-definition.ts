// Berth's rules on a compose document: what a stack may ask for, turned into a StackDefinition that names
// everything Berth will create. Keys Berth does not support are refused by name, never ignored; what
// would weaken the sandbox is refused unless configuration allows it, and never for the agent service
// (its container is always created with Berth's hardening). Host paths are resolved by the caller's
// `resolveHostPath` (the volume allowlist); nothing here touches the file system or the runtime.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { parse as parseShellWords } from 'shell-quote';
import { parseCpus, parseDuration, parseMemory } from '../../units.js';
import type { ComposeDocument } from './compose-document.js';
import type { HealthcheckSpec, ServicePrivileges } from '../../runtime/ports/container-specs.js';

export class StackDefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StackDefinitionError';
  }
}

export type DependencyCondition = 'service_started' | 'service_healthy' | 'service_completed_successfully';

export type Healthcheck = HealthcheckSpec;

export type StackMount =
  | { readonly kind: 'volume'; readonly volume: string; readonly containerPath: string; readonly readOnly: boolean }
  | { readonly kind: 'bind'; readonly hostPath: string; readonly containerPath: string; readonly readOnly: boolean };

export type ServiceImage =
  | { readonly kind: 'image'; readonly reference: string }
  | {
      readonly kind: 'build';
      /** Host directory (resolved and allowed) sent as the build context. */
      readonly context: string;
      /** Path of the Dockerfile inside the context. */
      readonly dockerfile: string;
      readonly args: Readonly<Record<string, string>>;
      readonly target?: string;
    };

export type RestartPolicy = 'no' | 'always' | 'on-failure' | 'unless-stopped';

export interface StackService {
  readonly name: string;
  readonly image: ServiceImage;
  readonly command?: readonly string[];
  readonly entrypoint?: readonly string[];
  readonly environment: Readonly<Record<string, string>>;
  readonly healthcheck?: Healthcheck;
  readonly dependsOn: readonly { readonly service: string; readonly condition: DependencyCondition }[];
  readonly mounts: readonly StackMount[];
  readonly workingDir?: string;
  readonly user?: string;
  readonly hostname?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly memoryBytes?: number;
  readonly cpus?: number;
  readonly restart: RestartPolicy;
  readonly noNetwork: boolean;
  readonly privileges: ServicePrivileges;
}

export interface StackDefinition {
  /** Every service but the agent's, in an order where each comes after what it depends on. */
  readonly sidecars: readonly StackService[];
  /** The service the engine runs in (its command, entrypoint, healthcheck and restart are Berth's). */
  readonly agent: StackService;
  /** Named volumes declared at the top level (each service mount refers to one of these). */
  readonly volumes: readonly string[];
  /** Identifies the definition: a session's stack is reused only by a run with the same one. */
  readonly hash: string;
}

/** Every image Berth builds is named under this prefix; no request may name one (they belong to their stack). */
export const BUILT_IMAGE_PREFIX = 'localhost/berth-build-';

/**
 * The name a run's plan gives the image Berth will build for a service, before the run has a session;
 * the image itself is tagged per session (sessionImageTag), so no two sessions ever share one.
 */
export function builtImageTag(definition: Pick<StackDefinition, 'hash'>, service: string): string {
  return `${BUILT_IMAGE_PREFIX}${service}:${definition.hash}`;
}

/**
 * Whether a reference names (or, as a short name, could resolve to) an image Berth built for a stack:
 * `localhost/berth-build-…`, and `berth-build-…` under any registry or none.
 */
export function isBuiltImageReference(reference: string): boolean {
  return /(?:^|\/)berth-build-/i.test(reference);
}

/** The tag of the image a session's stack built for a service. */
export function sessionImageTag(definition: Pick<StackDefinition, 'hash'>, service: string, sessionId: string): string {
  return `${BUILT_IMAGE_PREFIX}${service}:${definition.hash}-${sessionId}`;
}

export interface DefinitionPolicy {
  readonly allowPrivileged: boolean;
  readonly allowHostNetwork: boolean;
  readonly allowHostVolumes: boolean;
  /** `build:` is refused unless the operator allowed builds (SERVICE_COMPOSE_ALLOW_BUILD). */
  readonly allowBuild: boolean;
  /** Upper bounds of a service's `mem_limit` and `cpus` (SERVICE_AGENT_MAX_MEMORY, SERVICE_AGENT_MAX_CPUS). */
  readonly maxMemoryBytes: number;
  readonly maxCpus: number;
}

export interface DefinitionContext {
  readonly policy: DefinitionPolicy;
  /** The service the engine runs in (container.environment.service). */
  readonly agentService: string;
  /** Directory of the compose file, for relative paths (already resolved). */
  readonly baseDir: string;
  /** Resolves a host path through symlinks and checks it against the volume allowlist (throws when refused). */
  resolveHostPath(path: string, at: string): Promise<string>;
}

/** Keys of a service Berth creates containers from; every other key is refused by name. */
const SUPPORTED_SERVICE_KEYS = new Set([
  'image', 'build', 'command', 'entrypoint', 'environment', 'healthcheck', 'depends_on', 'volumes', 'working_dir', 'user',
  'hostname', 'labels', 'expose', 'mem_limit', 'cpus', 'restart',
  // Refused below unless configuration allows them; named here so the refusal says why.
  'privileged', 'cap_add', 'devices', 'security_opt', 'network_mode', 'pid', 'ipc', 'userns_mode',
]);

/** Keys that make no sense for the agent service's container, which Berth creates for each run. */
const AGENT_UNSUPPORTED_KEYS = new Map([
  ['user', 'the engine runs as the image\'s user'],
  ['hostname', 'the engine container\'s hostname is Berth\'s'],
  ['mem_limit', 'set container.memory in the request'],
  ['cpus', 'set container.cpus in the request'],
]);

const SERVICE_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;
const LABEL_PREFIX = 'berth.';

const fail = (message: string): never => {
  throw new StackDefinitionError(message);
};

export async function defineStack(document: ComposeDocument, context: DefinitionContext): Promise<StackDefinition> {
  for (const key of Object.keys(document)) {
    if (key.startsWith('x-') || key === 'services' || key === 'volumes' || key === 'version' || key === 'name') continue;
    fail(`top-level "${key}" is not supported by Berth${key === 'networks' ? ' (every stack gets one network of its own, where services reach each other by name)' : ''}`);
  }
  const volumes = topLevelVolumes(document.volumes ?? {});
  const names = Object.keys(document.services);
  for (const name of names) {
    if (!SERVICE_NAME.test(name)) fail(`services.${name}: a service name must be lower-case letters, digits, "_", "." or "-" (at most 63)`);
  }
  if (!names.includes(context.agentService)) {
    fail(`service "${context.agentService}" (container.environment.service) is not in the file; it defines ${names.map((n) => `"${n}"`).join(', ')}`);
  }
  const services: StackService[] = [];
  for (const name of names) {
    services.push(await defineService(name, document.services[name]!, { ...context, volumes, services: names }));
  }
  const agent = services.find((service) => service.name === context.agentService)!;
  for (const service of services) {
    if (service !== agent && service.dependsOn.some((dependency) => dependency.service === agent.name)) {
      fail(`services.${service.name}.depends_on: "${agent.name}" is the agent service, which runs only for the length of a run; nothing can depend on it`);
    }
  }
  const sidecars = startOrder(services.filter((service) => service !== agent));
  const hash = createHash('sha256').update(JSON.stringify({ sidecars, agent, volumes })).digest('hex').slice(0, 16);
  return { sidecars, agent, volumes, hash };
}

function topLevelVolumes(declared: Readonly<Record<string, Readonly<Record<string, unknown>> | null>>): string[] {
  for (const [name, options] of Object.entries(declared)) {
    if (!VOLUME_NAME.test(name)) fail(`volumes.${name}: a volume name must be letters, digits, "_", "." or "-"`);
    for (const [key, value] of Object.entries(options ?? {})) {
      if (key === 'driver' && value === 'local') continue;
      if (key.startsWith('x-')) continue;
      fail(`volumes.${name}.${key} is not supported by Berth (a stack's volumes are local volumes it creates and removes)`);
    }
  }
  return Object.keys(declared);
}

interface ServiceContext extends DefinitionContext {
  readonly volumes: readonly string[];
  readonly services: readonly string[];
}

async function defineService(name: string, raw: Readonly<Record<string, unknown>>, context: ServiceContext): Promise<StackService> {
  const at = `services.${name}`;
  const isAgent = name === context.agentService;
  for (const key of Object.keys(raw)) {
    if (key.startsWith('x-')) continue;
    if (!SUPPORTED_SERVICE_KEYS.has(key)) {
      const why = key === 'ports'
        ? ' (ports would be published on the shared host; services reach each other on the stack network without them)'
        : key === 'networks'
          ? ' (every stack gets one network of its own, where services reach each other by name)'
          : '';
      fail(`${at}.${key} is not supported by Berth${why}`);
    }
    const agentReason = isAgent ? AGENT_UNSUPPORTED_KEYS.get(key) : undefined;
    if (agentReason !== undefined) fail(`${at}.${key} is not supported on the agent service: ${agentReason}`);
  }
  const privileges = servicePrivileges(raw, at, context.policy, isAgent);
  return {
    name,
    image: await serviceImage(raw, at, context),
    ...optional('command', commandLine(raw.command, `${at}.command`)),
    ...optional('entrypoint', commandLine(raw.entrypoint, `${at}.entrypoint`)),
    environment: environmentOf(raw.environment, `${at}.environment`),
    ...optional('healthcheck', healthcheckOf(raw.healthcheck, `${at}.healthcheck`)),
    dependsOn: dependenciesOf(raw.depends_on, `${at}.depends_on`, name, context.services),
    mounts: await mountsOf(raw.volumes, at, context),
    ...optional('workingDir', absolutePath(raw.working_dir, `${at}.working_dir`)),
    ...optional('user', raw.user === undefined ? undefined : String(raw.user)),
    ...optional('hostname', raw.hostname as string | undefined),
    labels: labelsOf(raw.labels, `${at}.labels`),
    ...optional('memoryBytes', memoryOf(raw.mem_limit, `${at}.mem_limit`, context.policy.maxMemoryBytes)),
    ...optional('cpus', cpusOf(raw.cpus, `${at}.cpus`, context.policy.maxCpus)),
    restart: restartOf(raw.restart, `${at}.restart`),
    noNetwork: raw.network_mode === 'none',
    privileges,
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function servicePrivileges(raw: Readonly<Record<string, unknown>>, at: string, policy: DefinitionPolicy, isAgent: boolean): ServicePrivileges {
  const needs = (allowed: boolean, variable: string, what: string): void => {
    if (isAgent) fail(`${what} is refused on the agent service: the engine always runs with Berth's hardening`);
    if (!allowed) fail(`${what} is refused on this server (${variable} is false)`);
  };
  const privileged = raw.privileged === true;
  if (privileged) needs(policy.allowPrivileged, 'SERVICE_COMPOSE_ALLOW_PRIVILEGED', `${at}.privileged`);
  const capAdd = (raw.cap_add as string[] | undefined) ?? [];
  if (capAdd.length > 0) needs(policy.allowPrivileged, 'SERVICE_COMPOSE_ALLOW_PRIVILEGED', `${at}.cap_add (${capAdd.join(', ')})`);
  const devices = (raw.devices as string[] | undefined) ?? [];
  if (devices.length > 0) needs(policy.allowPrivileged, 'SERVICE_COMPOSE_ALLOW_PRIVILEGED', `${at}.devices`);
  let seccompUnconfined = false;
  let apparmorUnconfined = false;
  let labelDisable = false;
  for (const option of (raw.security_opt as string[] | undefined) ?? []) {
    const normalised = option.replace(':', '=');
    if (normalised === 'no-new-privileges' || normalised === 'no-new-privileges=true') continue;
    needs(policy.allowPrivileged, 'SERVICE_COMPOSE_ALLOW_PRIVILEGED', `${at}.security_opt "${option}" (it weakens the sandbox)`);
    if (normalised === 'seccomp=unconfined') seccompUnconfined = true;
    else if (normalised === 'apparmor=unconfined') apparmorUnconfined = true;
    else if (normalised === 'label=disable') labelDisable = true;
    else fail(`${at}.security_opt "${option}" is not supported by Berth (supported: no-new-privileges, seccomp=unconfined, apparmor=unconfined, label=disable)`);
  }
  if (raw.userns_mode !== undefined) {
    if (raw.userns_mode !== 'host') fail(`${at}.userns_mode "${String(raw.userns_mode)}" is not supported by Berth (every stack runs in Berth's user namespace)`);
    fail(`${at}.userns_mode "host" is refused: container root would be host root`);
  }
  const hostNamespace = (key: 'network_mode' | 'pid' | 'ipc', allowedOthers: readonly string[]): boolean => {
    const value = raw[key];
    if (value === undefined || allowedOthers.includes(String(value))) return false;
    if (value !== 'host') fail(`${at}.${key} "${String(value)}" is not supported by Berth${key === 'network_mode' ? ' (services share the stack network)' : ''}`);
    needs(policy.allowHostNetwork, 'SERVICE_COMPOSE_ALLOW_HOST_NETWORK', `${at}.${key} "host"`);
    return true;
  };
  const hostNetwork = hostNamespace('network_mode', isAgent ? [] : ['none', 'bridge']);
  const hostPid = hostNamespace('pid', []);
  const hostIpc = hostNamespace('ipc', ['private', 'shareable']);
  return { privileged, capAdd, devices, seccompUnconfined, apparmorUnconfined, labelDisable, hostNetwork, hostPid, hostIpc };
}

async function serviceImage(raw: Readonly<Record<string, unknown>>, at: string, context: ServiceContext): Promise<ServiceImage> {
  const build = raw.build as string | Readonly<Record<string, unknown>> | undefined;
  if (build === undefined) {
    if (typeof raw.image !== 'string' || raw.image === '') fail(`${at}: needs "image" or "build"`);
    return { kind: 'image', reference: raw.image as string };
  }
  // With both, Compose tags the built image with `image`; Berth names built images itself (they belong to the stack).
  if (raw.image !== undefined) fail(`${at}: give "image" or "build", not both (Berth names the images it builds)`);
  if (!context.policy.allowBuild) fail(`${at}.build is refused on this server (SERVICE_COMPOSE_ALLOW_BUILD is false); use an image present on the host`);
  const options = typeof build === 'string' ? { context: build } : build;
  for (const key of Object.keys(options)) {
    if (!['context', 'dockerfile', 'args', 'target'].includes(key) && !key.startsWith('x-')) fail(`${at}.build.${key} is not supported by Berth`);
  }
  const contextText = (options.context as string | undefined) ?? '.';
  const contextDir = await context.resolveHostPath(hostPathOf(contextText, context.baseDir, `${at}.build.context`), `${at}.build.context`);
  const dockerfile = dockerfileOf(options.dockerfile, `${at}.build.dockerfile`);
  return {
    kind: 'build',
    context: contextDir,
    dockerfile,
    args: listOrDict(options.args, `${at}.build.args`),
    ...optional('target', options.target as string | undefined),
  };
}

/**
 * A relative path of plain names inside the context. Podman reads a value that parses as JSON as a list
 * of paths, absolute ones included, so only the characters of file names and `/` are accepted; that it
 * is a regular file (no link) is checked in the archive Berth sends (runtime/podman/image-build.ts).
 */
function dockerfileOf(value: unknown, at: string): string {
  if (value === undefined) return 'Dockerfile';
  if (typeof value !== 'string') fail(`${at} must be a string: a relative path inside the build context`);
  const text = value as string;
  if (!/^[A-Za-z0-9_.@+-][A-Za-z0-9_.@+/-]{0,254}$/.test(text)) {
    fail(`${at}: "${text}" must be a relative path inside the build context (letters, digits, "_", ".", "-", "@", "+" and "/")`);
  }
  const normalised = posix.normalize(text);
  if (text.split('/').includes('..') || normalised === '.' || normalised.endsWith('/')) fail(`${at}: "${text}" must name a file inside the build context`);
  return normalised;
}

/** A compose path: absolute, or relative to the compose file's directory; `~` is nobody's home here. */
function hostPathOf(text: string, baseDir: string, at: string): string {
  if (text.startsWith('~')) fail(`${at}: "${text}": "~" paths are not supported (whose home would it be?); use an absolute path`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) fail(`${at}: "${text}": only a local directory can be a build context`);
  return posix.resolve(baseDir, text);
}

function commandLine(value: unknown, at: string): readonly string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) return value.map(String);
  const words = parseShellWords(String(value));
  if (words.some((word) => typeof word !== 'string')) {
    fail(`${at}: "${String(value)}" uses shell operators; write it as a list, e.g. ["sh", "-c", "…"]`);
  }
  return words as string[];
}

/** `environment` as a list (`A=b`, or `A` alone: unset, so left out) or a mapping (null: left out). */
function environmentOf(value: unknown, at: string): Record<string, string> {
  const env = listOrDict(value, at);
  for (const name of Object.keys(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) fail(`${at}: "${name}" is not a valid variable name`);
  }
  return env;
}

function listOrDict(value: unknown, at: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  const entries: [string, string][] = [];
  if (Array.isArray(value)) {
    for (const item of value as string[]) {
      const equals = item.indexOf('=');
      if (equals === 0) fail(`${at}: "${item}" has no name`);
      if (equals > 0) entries.push([item.slice(0, equals), item.slice(equals + 1)]);
    }
  } else {
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      if (item !== null && item !== undefined) entries.push([key, String(item)]);
    }
  }
  return Object.fromEntries(entries);
}

function healthcheckOf(value: unknown, at: string): Healthcheck | undefined {
  if (value === undefined) return undefined;
  const raw = value as { test?: string | string[]; interval?: string; timeout?: string; retries?: number; start_period?: string; disable?: boolean };
  if (raw.disable === true) return undefined;
  let test: string[];
  if (raw.test === undefined) fail(`${at}.test is missing (Berth does not use a healthcheck from the image)`);
  if (typeof raw.test === 'string') test = ['CMD-SHELL', raw.test];
  else {
    const [kind, ...rest] = raw.test!;
    if (kind === 'NONE') return undefined;
    if (kind !== 'CMD' && kind !== 'CMD-SHELL') fail(`${at}.test must start with "CMD", "CMD-SHELL" or "NONE"`);
    if (rest.length === 0) fail(`${at}.test has no command`);
    test = [kind!, ...rest];
  }
  const duration = (text: string | undefined, key: string, fallbackMs: number): number => {
    if (text === undefined) return fallbackMs;
    if (text === '0s' || text === '0') return 0;
    return parseDuration(text) ?? fail(`${at}.${key}: "${text}" is not a duration such as 10s or 1m30s`);
  };
  const retries = raw.retries ?? 3;
  if (!Number.isInteger(retries) || retries < 1) fail(`${at}.retries must be a positive integer`);
  return {
    test,
    // Compose's defaults: every 30 s, 30 s timeout, 3 retries, no start period.
    intervalMs: duration(raw.interval, 'interval', 30_000) || 30_000,
    timeoutMs: duration(raw.timeout, 'timeout', 30_000) || 30_000,
    retries,
    startPeriodMs: duration(raw.start_period, 'start_period', 0),
  };
}

function dependenciesOf(value: unknown, at: string, self: string, services: readonly string[]): StackService['dependsOn'] {
  if (value === undefined) return [];
  const entries: { service: string; condition: DependencyCondition }[] = Array.isArray(value)
    ? (value as string[]).map((service) => ({ service, condition: 'service_started' as const }))
    : Object.entries(value as Record<string, { condition: DependencyCondition }>).map(([service, options]) => ({ service, condition: options.condition }));
  for (const { service } of entries) {
    if (service === self) fail(`${at}: a service cannot depend on itself`);
    if (!services.includes(service)) fail(`${at}: "${service}" is not a service of the file`);
  }
  return entries;
}

async function mountsOf(value: unknown, at: string, context: ServiceContext): Promise<StackMount[]> {
  const mounts: StackMount[] = [];
  for (const [index, item] of ((value as unknown[] | undefined) ?? []).entries()) {
    const field = `${at}.volumes[${index}]`;
    const mount = typeof item === 'string' ? shortMount(item, field) : longMount(item as Record<string, unknown>, field);
    if (mount.kind === 'volume') {
      if (!context.volumes.includes(mount.source)) {
        fail(`${field}: volume "${mount.source}" is not declared under the top-level "volumes" (anonymous volumes are not supported)`);
      }
      mounts.push({ kind: 'volume', volume: mount.source, containerPath: mount.target, readOnly: mount.readOnly });
      continue;
    }
    if (!context.policy.allowHostVolumes) fail(`${field}: bind mounts of host paths are refused on this server (SERVICE_COMPOSE_ALLOW_HOST_VOLUMES is false)`);
    const hostPath = await context.resolveHostPath(hostPathOf(mount.source, context.baseDir, field), field);
    mounts.push({ kind: 'bind', hostPath, containerPath: mount.target, readOnly: mount.readOnly });
  }
  const targets = new Set<string>();
  for (const mount of mounts) {
    if (targets.has(mount.containerPath)) fail(`${at}.volumes: "${mount.containerPath}" is mounted twice`);
    targets.add(mount.containerPath);
  }
  return mounts;
}

interface ParsedMount {
  readonly kind: 'volume' | 'bind';
  readonly source: string;
  readonly target: string;
  readonly readOnly: boolean;
}

/** `name:/path[:ro|rw]` or `./dir:/path[:ro|rw]`; a lone `/path` (an anonymous volume) is refused. */
function shortMount(text: string, at: string): ParsedMount {
  const parts = text.split(':');
  if (parts.length < 2 || parts.length > 3) fail(`${at}: "${text}" is not source:target[:ro|rw] (anonymous volumes are not supported)`);
  const [source = '', target = '', mode] = parts;
  if (mode !== undefined && mode !== 'ro' && mode !== 'rw') fail(`${at}: mode "${mode}" is not supported (ro or rw)`);
  const kind = /^[./~]/.test(source) ? 'bind' : 'volume';
  return { kind, source, target: absolutePath(target, at)!, readOnly: mode === 'ro' };
}

function longMount(raw: Record<string, unknown>, at: string): ParsedMount {
  for (const key of Object.keys(raw)) {
    if (!['type', 'source', 'target', 'read_only'].includes(key)) fail(`${at}.${key} is not supported by Berth`);
  }
  if (raw.type !== 'volume' && raw.type !== 'bind') fail(`${at}.type "${String(raw.type)}" is not supported (volume or bind)`);
  if (typeof raw.source !== 'string' || raw.source === '') fail(`${at}.source is required`);
  return { kind: raw.type as 'volume' | 'bind', source: raw.source as string, target: absolutePath(raw.target, `${at}.target`)!, readOnly: raw.read_only === true };
}

function absolutePath(value: unknown, at: string): string | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (!text.startsWith('/')) fail(`${at}: "${text}" must be an absolute path`);
  if (text.split('/').some((segment) => segment === '..')) fail(`${at}: "${text}" must not contain ".."`);
  return posix.normalize(text);
}

function labelsOf(value: unknown, at: string): Record<string, string> {
  const labels = listOrDict(value, at);
  for (const key of Object.keys(labels)) {
    if (key.startsWith(LABEL_PREFIX)) fail(`${at}: "${key}": labels starting with "${LABEL_PREFIX}" are Berth's own`);
  }
  return labels;
}

function memoryOf(value: unknown, at: string, maxBytes: number): number | undefined {
  if (value === undefined) return undefined;
  const bytes = typeof value === 'number' ? value : parseMemory(String(value));
  if (bytes === undefined || !Number.isSafeInteger(bytes) || bytes < 6 * 1024 ** 2) fail(`${at}: "${String(value)}" is not a memory size of at least 6m, such as 512m`);
  if (bytes! > maxBytes) fail(`${at}: "${String(value)}" is above this server's maximum of ${maxBytes} bytes (SERVICE_AGENT_MAX_MEMORY)`);
  return bytes;
}

function cpusOf(value: unknown, at: string, max: number): number | undefined {
  if (value === undefined) return undefined;
  const cpus = typeof value === 'number' ? value : parseCpus(String(value));
  if (cpus === undefined || !(cpus > 0)) fail(`${at}: "${String(value)}" is not a positive number of CPUs`);
  if (cpus! > max) fail(`${at}: "${String(value)}" is above this server's maximum of ${max} CPUs (SERVICE_AGENT_MAX_CPUS)`);
  return cpus;
}

function restartOf(value: unknown, at: string): RestartPolicy {
  if (value === undefined) return 'no';
  const text = String(value);
  if (text === 'no' || text === 'always' || text === 'on-failure' || text === 'unless-stopped') return text;
  return fail(`${at}: "${text}" is not one of no, always, on-failure, unless-stopped`);
}

/** Services ordered so that each comes after its dependencies; a cycle is refused, naming it. */
function startOrder(services: readonly StackService[]): StackService[] {
  const byName = new Map(services.map((service) => [service.name, service]));
  const ordered: StackService[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (service: StackService, path: readonly string[]): void => {
    const seen = state.get(service.name);
    if (seen === 'done') return;
    if (seen === 'visiting') fail(`services: depends_on has a cycle: ${[...path, service.name].join(' → ')}`);
    state.set(service.name, 'visiting');
    for (const dependency of service.dependsOn) {
      const next = byName.get(dependency.service);
      if (next) visit(next, [...path, service.name]);
    }
    state.set(service.name, 'done');
    ordered.push(service);
  };
  for (const service of services) visit(service, []);
  return ordered;
}
