// Volume rules: `host_path:container_path[:options]` parsed, the host path resolved through symlinks and
// checked against SERVICE_AGENT_ALLOWED_VOLUMES, the container path checked against the blocklist, which
// is also the workdir's (paths.ts). The file system is reached only through the injected RealpathFs.
import { lstat, realpath } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import type { MountOption, VolumeMount } from '../run-plan.js';
import { checkCharacters } from './text.js';

/** The file-system calls volume checks make; tests pass a fake, production the node:fs/promises defaults. */
export interface RealpathFs {
  realpath(path: string): Promise<string>;
  /** Tells a dangling symlink (refused) from a missing path (allowed to fail at mount time); optional for fakes. */
  lstat?(path: string): Promise<unknown>;
}

export const nodeRealpathFs: RealpathFs = { realpath: (path) => realpath(path), lstat: (path) => lstat(path) };

/**
 * Mount options a caller may give: `ro`, `rw`, `z`, `Z`, `noexec`, `nosuid`, `nodev`. Everything else is
 * refused: propagation (`shared`, `rshared`, `slave`, `rslave`, `private`, `rprivate`, `unbindable`,
 * `bind-propagation=…`) because it lets mounts leak between host and container; `suid`, `dev`, `exec`
 * because they undo a hardening; `U` and `O` because they chown or overlay the host directory;
 * `noatime`, `relatime`, `nodiratime` because Podman refuses them on bind mounts ("invalid option type").
 */
export const ALLOWED_MOUNT_OPTIONS = ['ro', 'rw', 'z', 'Z', 'noexec', 'nosuid', 'nodev'] as const satisfies readonly MountOption[];

/** Container paths that neither a volume nor the workdir may be or lie under. */
export const BLOCKED_CONTAINER_PATHS = [
  '/etc', '/proc', '/sys', '/dev',
  '/opt/claude', // the engine executable, mounted by Berth from the engine image
  '/var/lib/berth', // the session's engine configuration directory, mounted by Berth
  '/run/berth', // Berth's own runtime files inside the container
  '/run/secrets', // where Podman puts file secrets
] as const;

/** Berth's own mount points: a volume may not be mounted on one of their ancestors either (it would nest them). */
export const BERTH_MOUNT_POINTS = ['/opt/claude', '/var/lib/berth', '/run/berth', '/run/secrets'] as const;

/** Entries of a home directory (`/root` and every `/home/<user>`) that are blocked, with everything under them. */
export const BLOCKED_HOME_ENTRIES = ['.claude', '.claude.json', '.ssh', '.aws', '.config/gcloud', '.kube', '.docker', '.gnupg'] as const;

export const PATH_MAX_BYTES = 4096;
export const NAME_MAX_BYTES = 255;

/** A host path that is Berth's own state: refused as a volume, as are paths under it and its ancestors. */
export interface ProtectedHostPath {
  readonly path: string;
  /** The configuration variable it comes from, for messages. */
  readonly name: string;
}

export interface HostPathPolicy {
  readonly allowedVolumes: readonly string[];
  readonly allowAllVolumes: boolean;
  readonly protectedPaths: readonly ProtectedHostPath[];
  /** Whether `z`/`Z` may relabel host files (SERVICE_AGENT_ALLOW_RELABEL). */
  readonly allowRelabel?: boolean;
}

/** `z`/`Z` make Podman relabel the host tree for SELinux, for every other user of it too: an operator's choice. */
export function checkRelabel(spec: VolumeSpec, policy: HostPathPolicy): void {
  const relabel = spec.options.find((option) => option === 'z' || option === 'Z');
  if (relabel !== undefined && policy.allowRelabel !== true) {
    throw errors.invalid(`${spec.field}: mount option "${relabel}" relabels host files and is disabled on this server (SERVICE_AGENT_ALLOW_RELABEL)`);
  }
}

/** A volume after parsing, before any file-system access. */
export interface VolumeSpec {
  readonly field: string;
  /** Absolute, with doubled and trailing slashes removed; not yet symlink-resolved. */
  readonly hostPath: string;
  readonly containerPath: string;
  readonly readOnly: boolean;
  readonly options: readonly MountOption[];
}

export function isUnder(path: string, root: string): boolean {
  return root === '/' || path === root || path.startsWith(`${root}/`);
}

/**
 * Checks an absolute path and returns it with doubled and trailing slashes collapsed. Refused: relative
 * paths, `.` and `..` segments, control characters, invalid UTF-8, over 4096 bytes or a name over 255 bytes.
 */
export function normaliseAbsolutePath(raw: string, what: string): string {
  checkCharacters(raw, what, false);
  if (!raw.startsWith('/')) throw errors.invalid(`${what} "${raw}" must be an absolute path (starting with /)`);
  if (Buffer.byteLength(raw, 'utf8') > PATH_MAX_BYTES) throw errors.invalid(`${what} is longer than ${PATH_MAX_BYTES} bytes`);
  const segments = raw.split('/').filter((segment) => segment !== '');
  for (const segment of segments) {
    if (segment === '.' || segment === '..') throw errors.invalid(`${what} "${raw}" must not contain "${segment}" segments`);
    if (Buffer.byteLength(segment, 'utf8') > NAME_MAX_BYTES) throw errors.invalid(`${what} has a name longer than ${NAME_MAX_BYTES} bytes`);
  }
  return `/${segments.join('/')}`;
}

/** Why a normalised container path is blocked (as a volume target or workdir), or undefined when it is not. */
export function blockedPathReason(path: string): string | undefined {
  if (path === '/') return 'it is the container\'s root directory';
  const blocked = BLOCKED_CONTAINER_PATHS.find((root) => isUnder(path, root));
  if (blocked !== undefined) return `it is ${path === blocked ? '' : 'under '}${blocked}, which is blocked`;
  const segments = path.split('/').slice(1);
  const home = segments[0] === 'root' ? 1 : segments[0] === 'home' && segments.length >= 2 ? 2 : undefined;
  if (home === undefined) return undefined;
  const inHome = segments.slice(home).join('/');
  const entry = BLOCKED_HOME_ENTRIES.find((name) => inHome === name || inHome.startsWith(`${name}/`));
  return entry === undefined ? undefined : `it is ${inHome === entry ? '' : 'under '}~/${entry} of a home directory, which is blocked`;
}

/** blockedPathReason, plus the ancestors of Berth's own mount points (a volume there would nest them). */
export function mountTargetReason(path: string): string | undefined {
  const blocked = blockedPathReason(path);
  if (blocked !== undefined) return blocked;
  const nested = BERTH_MOUNT_POINTS.find((mountPoint) => isUnder(mountPoint, path));
  return nested === undefined ? undefined : `it contains ${nested}, where Berth mounts its own files`;
}

export function parseVolumeSpec(spec: string, field: string): VolumeSpec {
  checkCharacters(spec, field, false);
  const parts = spec.split(':');
  if (parts.length < 2 || parts.length > 3) {
    const why = parts.length > 3 ? '; colons inside paths are not supported' : '';
    throw errors.invalid(`${field}: "${spec}" is not host_path:container_path[:options]${why}`);
  }
  const [host = '', target = '', optionText] = parts;
  if (host === '') throw errors.invalid(`${field}: the host path is empty`);
  if (target === '') throw errors.invalid(`${field}: the container path is empty`);
  const hostPath = normaliseAbsolutePath(host, `${field}: host path`);
  const containerPath = normaliseAbsolutePath(target, `${field}: container path`);
  const { readOnly, options } = parseMountOptions(optionText, field);
  return { field, hostPath, containerPath, readOnly, options };
}

function parseMountOptions(text: string | undefined, field: string): { readOnly: boolean; options: MountOption[] } {
  if (text === undefined) return { readOnly: false, options: [] };
  if (text === '') throw errors.invalid(`${field}: the options after the last ":" are empty`);
  const seen = new Set<string>();
  for (const option of text.split(',')) {
    if (!(ALLOWED_MOUNT_OPTIONS as readonly string[]).includes(option)) {
      throw errors.invalid(`${field}: mount option "${option}" is not allowed; allowed: ${ALLOWED_MOUNT_OPTIONS.join(', ')}`);
    }
    if (seen.has(option)) throw errors.invalid(`${field}: mount option "${option}" is given twice`);
    seen.add(option);
  }
  for (const [a, b] of [['ro', 'rw'], ['z', 'Z']] as const) {
    if (seen.has(a) && seen.has(b)) throw errors.invalid(`${field}: mount options "${a}" and "${b}" contradict each other`);
  }
  const options = [...seen].filter((option) => option !== 'ro' && option !== 'rw') as MountOption[];
  return { readOnly: seen.has('ro'), options };
}

function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

/**
 * Resolves symlinks like realpath(3). A path that does not exist yet resolves to its deepest existing
 * ancestor's realpath plus the missing names, so a missing path under a symlink is judged by where the
 * link points. A dangling symlink, and any error other than ENOENT, is thrown.
 */
export async function resolveHostPath(path: string, fs: RealpathFs): Promise<string> {
  try {
    return await fs.realpath(path);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT' || path === '/') throw error;
    const parent = await resolveHostPath(posix.dirname(path), fs);
    const candidate = posix.join(parent, posix.basename(path));
    if (fs.lstat) {
      const exists = await fs.lstat(candidate).then(() => true, (lstatError: unknown) => {
        if (errorCode(lstatError) === 'ENOENT') return false;
        throw lstatError;
      });
      if (exists) throw Object.assign(new Error(`${path} is a symbolic link to a missing target`), { code: 'EDANGLING' });
    }
    return candidate;
  }
}

/** An allowlist entry or protected path, symlink-resolved when possible, else as written (normalised). */
async function resolveTrusted(path: string, fs: RealpathFs): Promise<string> {
  const normalised = posix.normalize(path).replace(/(.)\/+$/, '$1');
  return resolveHostPath(normalised, fs).catch(() => normalised);
}

/** The host path to mount (symlink-resolved) if the policy allows it; throws a 400 naming the field otherwise. */
export async function resolveAllowedHostPath(spec: VolumeSpec, policy: HostPathPolicy, fs: RealpathFs): Promise<string> {
  const { field, hostPath } = spec;
  if (!policy.allowAllVolumes && policy.allowedVolumes.length === 0) {
    throw errors.invalid(`${field}: volume mounts are disabled on this server (SERVICE_AGENT_ALLOWED_VOLUMES is empty)`);
  }
  let resolved: string;
  try {
    resolved = await resolveHostPath(hostPath, fs);
  } catch (error) {
    const code = errorCode(error);
    const why = code === 'EDANGLING' ? 'is a symbolic link whose target does not exist' : `cannot be resolved (${code ?? 'error'})`;
    throw errors.invalid(`${field}: host path "${hostPath}" ${why}`);
  }
  const shown = resolved === hostPath ? `host path "${hostPath}"` : `host path "${hostPath}" resolves to "${resolved}", which`;
  for (const entry of policy.protectedPaths) {
    const own = await resolveTrusted(entry.path, fs);
    if (isUnder(resolved, own) || isUnder(own, resolved)) {
      throw errors.invalid(`${field}: ${shown} overlaps Berth's own files (${entry.name}) and cannot be mounted`);
    }
  }
  if (policy.allowAllVolumes) return resolved;
  for (const entry of policy.allowedVolumes) {
    if (isUnder(resolved, await resolveTrusted(entry, fs))) return resolved;
  }
  throw errors.invalid(`${field}: ${shown} is not in SERVICE_AGENT_ALLOWED_VOLUMES`);
}

export function checkContainerPath(spec: VolumeSpec): void {
  const reason = mountTargetReason(spec.containerPath);
  if (reason !== undefined) {
    throw errors.invalid(`${spec.field}: container path "${spec.containerPath}" cannot be mounted on: ${reason}`);
  }
}

/** Two volumes on one container path would shadow each other; Podman refuses it too. */
export function checkDistinctTargets(specs: readonly VolumeSpec[]): void {
  const seen = new Map<string, string>();
  for (const spec of specs) {
    const earlier = seen.get(spec.containerPath);
    if (earlier !== undefined) throw errors.invalid(`${spec.field}: container path "${spec.containerPath}" is already used by ${earlier}`);
    seen.set(spec.containerPath, spec.field);
  }
}

/** Where Berth keeps its own state on the host: the configuration protectedHostPaths reads. */
export type ProtectedPathSettings = Pick<Config, 'dataDir' | 'podmanSocket'> & {
  readonly agent: Pick<Config['agent'], 'sessionsDir' | 'sessionsHostDir'>;
  readonly engine: Pick<Config['engine'], 'credentialsFile'>;
  readonly auth: Pick<Config['auth'], 'blacklistBoltPath'>;
};

/** The configuration of the host-path rules: the volume allowlist and relabelling beside Berth's own paths. */
export type HostPathSettings = ProtectedPathSettings & {
  readonly agent: Pick<Config['agent'], 'allowedVolumes' | 'allowAllVolumes' | 'allowRelabel'>;
};

/** Berth's host state that no volume may expose: data, sessions, credentials file and Podman socket. */
export function protectedHostPaths(config: ProtectedPathSettings): ProtectedHostPath[] {
  const paths: ProtectedHostPath[] = [
    { path: config.dataDir, name: 'SERVICE_DATA_DIR' },
    { path: config.agent.sessionsDir, name: 'SERVICE_AGENT_SESSIONS_DIR' },
    { path: config.agent.sessionsHostDir, name: 'SERVICE_AGENT_SESSIONS_HOST_DIR' },
  ];
  if (config.engine.credentialsFile !== undefined) paths.push({ path: config.engine.credentialsFile, name: 'SERVICE_ENGINE_CREDENTIALS_FILE' });
  paths.push({ path: config.auth.blacklistBoltPath, name: 'SERVICE_AUTH_BLACKLIST_BOLT_PATH' });
  const socket = config.podmanSocket?.replace(/^unix:\/\//, '');
  if (socket?.startsWith('/')) paths.push({ path: socket, name: 'SERVICE_PODMAN_SOCKET' });
  return paths.filter((entry) => entry.path.startsWith('/'));
}

export function hostPathPolicy(config: HostPathSettings): HostPathPolicy {
  return {
    allowedVolumes: config.agent.allowedVolumes,
    allowAllVolumes: config.agent.allowAllVolumes,
    protectedPaths: protectedHostPaths(config),
    allowRelabel: config.agent.allowRelabel,
  };
}

/** All volume rules in one call: parse, host path allowlist, container path blocklist, distinct targets. */
export async function validateVolumes(specs: readonly string[] | undefined, policy: HostPathPolicy, fs: RealpathFs = nodeRealpathFs): Promise<VolumeMount[]> {
  const parsed = (specs ?? []).map((spec, index) => parseVolumeSpec(spec, `container.volumes[${index}]`));
  const hostPaths: string[] = [];
  for (const spec of parsed) {
    checkRelabel(spec, policy);
    hostPaths.push(await resolveAllowedHostPath(spec, policy, fs));
  }
  parsed.forEach(checkContainerPath);
  checkDistinctTargets(parsed);
  return parsed.map((spec, index) => toVolumeMount(spec, hostPaths[index]!));
}

export function toVolumeMount(spec: VolumeSpec, resolvedHostPath: string): VolumeMount {
  return { hostPath: resolvedHostPath, containerPath: spec.containerPath, readOnly: spec.readOnly, options: spec.options };
}
