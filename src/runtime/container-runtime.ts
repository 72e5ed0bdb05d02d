// What Berth needs from a container runtime, in Berth's own terms. The only implementation talks to
// Podman's libpod REST API (runtime/podman); no Podman JSON type is visible outside that folder.

import type { ContainerKind } from './container-policy.js';

/** A failure of the container runtime, in Berth's terms: unreachable, or it refused/failed the call. */
export class RuntimeError extends Error {
  constructor(
    message: string,
    readonly unreachable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RuntimeError';
  }
}

export const RUN_LABEL = 'berth.run';
/**
 * On an engine the pool pre-started (core/pool), its pool's kind (`run` or `agent`); kept after a claim
 * (labels cannot change), when the container's name says it is a run's (`berth-run-…`, not `berth-pool-…`).
 */
export const POOL_LABEL = 'berth.pool';
export const PROBE_LABEL = 'berth.probe';
export const INSTANCE_LABEL = 'berth.instance';
/** On the never-started container that holds an image's files mounted for the instance named by its value. */
export const IMAGE_TREE_LABEL = 'berth.image-tree';
/** On every container, network and volume of a compose stack: the session it belongs to. */
export const STACK_LABEL = 'berth.stack';
/** The Berth instance that created a stack (stacks outlive the process; a restart adopts or reaps its own). */
export const STACK_INSTANCE_LABEL = 'berth.stack-instance';
/** The stack definition's hash (core/compose-file/stack-definition.ts), on the stack's network. */
export const STACK_HASH_LABEL = 'berth.stack-hash';
/** On the images a stack built: the definition hash they were built for. */
export const STACK_BUILD_LABEL = 'berth.stack-build';
/** On a container holding a model-gateway credential that is not its run's (a stack service's): that grant's id. */
export const GRANT_LABEL = 'berth.grant';

export interface BindMount {
  readonly hostPath: string;
  readonly containerPath: string;
  readonly readOnly: boolean;
  readonly options: readonly string[];
  /**
   * Mounts made later below `hostPath` on the host appear in the container too (propagation `rslave`;
   * the host side must be a shared mount): a pooled engine's workdir receives its run's workspace after
   * the container started (core/runs/run-workspace.ts). Nothing mounted inside goes the other way.
   */
  readonly receivesHostMounts?: boolean;
}

/** The kinds of container an engine runs in. */
export type EngineContainerKind = Extract<ContainerKind, 'run' | 'pooled-engine' | 'agent'>;

/** A Podman secret exposed to the container as a read-only file. */
export interface SecretFile {
  readonly secret: string;
  readonly containerPath: string;
}

/**
 * The user namespace a container runs in. `mapped`: container ids 0…size-1 are host ids hostBase…, so no
 * process of the container is host root (rootful Podman). `rootless`: Podman runs rootless, and its own
 * user namespace already maps container root to the unprivileged user running it.
 */
export type UserNamespace = { readonly kind: 'mapped'; readonly hostBase: number; readonly size: number } | { readonly kind: 'rootless' };

/** A named volume of the runtime mounted into a container. */
export interface VolumeMountSpec {
  readonly volume: string;
  readonly containerPath: string;
  readonly readOnly: boolean;
}

/** A second network the container joins, reachable there under `aliases` (a compose stack's network). */
export interface NetworkAttachment {
  readonly name: string;
  readonly aliases: readonly string[];
  /** A fixed address on the network (a stack service's, which the others' /etc/hosts name). */
  readonly address?: string;
}

export interface ContainerSpec {
  /** Which row of the container policy (runtime/container-policy.ts) hardens it. */
  readonly kind: EngineContainerKind | 'workspace-clone';
  readonly name: string;
  readonly image: string;
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workdir: string;
  readonly createWorkdir: boolean;
  readonly bindMounts: readonly BindMount[];
  readonly secretFiles: readonly SecretFile[];
  readonly labels: Readonly<Record<string, string>>;
  readonly memoryBytes: number;
  readonly cpus: number;
  readonly cpuShares: number;
  readonly pidsLimit: number;
  readonly network: string;
  readonly userNamespace: UserNamespace;
  /** `uid:gid` the command runs as; the image's own user when undefined. */
  readonly user?: string;
  /** Keep the container's stdin open for attach() (persistent agents feed the engine turn by turn). */
  readonly interactive?: boolean;
  /** A compose stack's network, joined besides `network`. */
  readonly stackNetwork?: NetworkAttachment;
  /** /etc/hosts entries that win over Podman's own (e.g. which gateway host.containers.internal is). */
  readonly hostEntries?: readonly { readonly host: string; readonly address: string }[];
  readonly volumeMounts?: readonly VolumeMountSpec[];
  /**
   * The image's root file system read-only, /run and /var/tmp without Podman's writable tmpfs: what the
   * container can write is then only its mounts (a run's disk, runtime/run-disk.ts), never the host's
   * container storage.
   */
  readonly readOnlyRootfs?: boolean;
}

/** How a compose service checks its health (Podman runs it when Berth asks: runtime.runHealthcheck). */
export interface HealthcheckSpec {
  readonly test: readonly string[];
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly startPeriodMs: number;
}

/** Isolation a service container gives up, each only where configuration allowed it. */
export interface ServicePrivileges {
  readonly privileged: boolean;
  readonly capAdd: readonly string[];
  readonly devices: readonly string[];
  readonly seccompUnconfined: boolean;
  readonly apparmorUnconfined: boolean;
  readonly labelDisable: boolean;
  readonly hostNetwork: boolean;
  readonly hostPid: boolean;
  readonly hostIpc: boolean;
}

/**
 * A compose stack's service container (not the engine's): its image's own command or the file's, Podman's
 * default capabilities (a database needs to change owners and users), no new privileges, Berth's limits,
 * user namespace and labels, and only the privileges configuration allowed. Its root file system is
 * read-only and its image's VOLUMEs tmpfs: it writes only to its volumes (core/compose/stacks.ts puts them,
 * and its /tmp, /var/tmp and /run, on the stack's disk).
 */
export interface ServiceContainerSpec {
  readonly name: string;
  readonly image: string;
  readonly command?: readonly string[];
  readonly entrypoint?: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workdir?: string;
  readonly user?: string;
  readonly hostname?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly bindMounts: readonly BindMount[];
  readonly volumeMounts: readonly VolumeMountSpec[];
  /** undefined: no network at all (network_mode none). */
  readonly network: NetworkAttachment | undefined;
  /** /etc/hosts entries: the stack's other services (its network has no DNS server). */
  readonly hostEntries?: readonly { readonly host: string; readonly address: string }[];
  readonly healthcheck?: HealthcheckSpec;
  readonly restart: 'no' | 'always' | 'on-failure' | 'unless-stopped';
  readonly memoryBytes: number;
  readonly cpus: number;
  readonly pidsLimit: number;
  readonly userNamespace: UserNamespace;
  readonly privileges: ServicePrivileges;
}

export type HealthStatus = 'healthy' | 'unhealthy' | 'starting';

/**
 * A build confined like a run (runtime/podman/image-build.ts): its steps get no network at all (not even a
 * route to the host), a user namespace (rootful: the build runs under rootless Podman as `buildUser`),
 * no pulls (every image it reads must be local), and the context is packed by Berth (links pointing out
 * of it dropped, at most `maxContextBytes` of file data).
 */
export interface BuildOptions {
  /** Host directory sent as the build context (Berth's own staging path: nothing in it is followed). */
  readonly contextDir: string;
  /** Relative path of a regular file inside the context. */
  readonly dockerfile: string;
  readonly tag: string;
  readonly args: Readonly<Record<string, string>>;
  readonly target?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxContextBytes: number;
  readonly userNamespace: UserNamespace;
  /** The unprivileged system user whose rootless Podman runs the build (created when missing; rootful only). */
  readonly buildUser: string;
  readonly memoryBytes: number;
  readonly cpus: number;
  /** Processes and threads of the whole build at once (its Podman, runc and every step): the policy's pids limit. */
  readonly pidsLimit: number;
  /**
   * The build's sandbox (context, storage of the images it reads and makes, every step's writes, the saved
   * result) is a file system of this size (runtime/run-disk.ts); undefined: the host cannot make one.
   */
  readonly diskBytes?: number;
  /**
   * Sees the Containerfile exactly as it will be built, before Podman gets anything; rejects to refuse the
   * build, or answers the local images (normalised references) it reads.
   */
  checkContainerfile(text: string): Promise<readonly string[]>;
}

/** The temporary directories of a build are named after the instance that asked for it (its stack label). */
export function sandboxPrefix(options: Pick<BuildOptions, 'labels'>): string {
  const instance = (options.labels[STACK_INSTANCE_LABEL] ?? '').replace(/[^A-Za-z0-9_.-]/g, '');
  return `berth-build-${instance === '' ? '' : `${instance}-`}`;
}

/** A build that did not finish within its time; its running step was killed. */
export class BuildTimeoutError extends RuntimeError {
  constructor(readonly timeoutMs: number) {
    super(`the build did not finish within ${Math.round(timeoutMs / 1000)} s`, false);
    this.name = 'BuildTimeoutError';
  }
}

/** The build context cannot be sent as it is: too large, or its Containerfile is not a regular file in it. */
export class BuildContextError extends RuntimeError {
  constructor(
    message: string,
    readonly reason: 'too-large' | 'containerfile',
  ) {
    super(message, false);
    this.name = 'BuildContextError';
  }
}

/** The network engine containers sit on, as Podman describes it. */
export interface AgentNetwork {
  readonly name: string;
  /** No route out of the network (Podman's `internal`). */
  readonly internal: boolean;
  /** Its bridge interface on this host (rootful; rootless Podman keeps it in its own namespace). */
  readonly bridge: string | undefined;
  readonly subnets: readonly string[];
  /** Addresses of the host on the network: where containers reach Berth's gateway. */
  readonly gateways: readonly string[];
  /** It carries the labels Berth creates it with: Berth made it, and removes it at stop. */
  readonly createdByBerth: boolean;
}

/** A runtime object (network, volume) found by label. */
export interface LabelledObject {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** A network as listed: its IPv4 subnets too (where its containers connect from). */
export interface NetworkSummary extends LabelledObject {
  readonly subnets: readonly string[];
}

/** A stack's network as created: its one IPv4 subnet and the host's address on it (its gateway). */
export interface StackNetwork {
  readonly subnet: string;
  readonly gateway: string;
}

/** A started-or-created container's standard streams, attached over one connection. */
/** Narrows a log tail: lines logged from `sinceMs` on (epoch ms), and at most `maxBytes` of them (the first ones). */
export interface LogTailOptions {
  readonly sinceMs?: number;
  readonly maxBytes?: number;
}

export interface AttachedContainer {
  /** The container's stdin; end() closes it (the process reads EOF). */
  readonly stdin: NodeJS.WritableStream;
  /** stdout/stderr from the moment of attaching until the container exits or close() is called. */
  readonly output: AsyncIterable<OutputChunk>;
  /** Drops the connection (stdin and output) without touching the container. */
  close(): void;
}

/** An image's files, mounted on the host until release(); `path` is the host path to bind-mount. */
export interface MountedImageTree {
  readonly path: string;
  release(): Promise<void>;
}

export interface ContainerExit {
  readonly exitCode: number;
  /** Killed by the kernel's OOM killer; undefined when the host cannot tell (cgroup v1 without its kernel log). */
  readonly oomKilled: boolean | undefined;
}

/** A container found by name or id: whether it still runs, since when, and how it ended if it has. */
export interface ContainerState {
  readonly id: string;
  readonly running: boolean;
  /** Epoch milliseconds; undefined when it never started. */
  readonly startedAtMs: number | undefined;
  readonly exit: ContainerExit;
}

export interface ImageInfo {
  readonly id: string;
  readonly user: string;
  /** The PATH its containers get. */
  readonly path?: string;
  readonly repoTags: readonly string[];
  readonly size: number;
  readonly labels?: Readonly<Record<string, string>>;
}

/** One local image as listed: every repository:tag it carries (none for a dangling image). */
export interface ImageSummary {
  readonly id: string;
  readonly repoTags: readonly string[];
  readonly size: number;
  readonly labels: Readonly<Record<string, string>>;
}

export interface PullOptions {
  /** Verify the registry's TLS certificate (false for an insecure registry on plain HTTP). */
  readonly tlsVerify: boolean;
  readonly quiet: boolean;
  readonly platform?: { readonly os: string; readonly arch: string; readonly variant?: string };
  /** Each progress line of the pull, with the blobs counted so far. */
  readonly onProgress?: (progress: PullProgress) => void;
  /** Stops the pull: the request to the runtime is closed, which ends the pull there too. */
  readonly signal?: AbortSignal;
}

/** One step of a pull. The runtime reports when a blob's copy starts, not when it ends. */
export interface PullProgress {
  /** The runtime's own words, e.g. "Copying blob sha256:…". */
  readonly message: string;
  /** Blobs (layers) whose copy has started so far. */
  readonly blobsStarted: number;
  /** Blobs copied: known only once the pull has gone past the layers (then equal to blobsStarted). */
  readonly blobsDone?: number;
}

export interface PulledImage {
  readonly id: string;
}

export interface RegistrySearchResult {
  readonly name: string;
  readonly description: string;
  readonly stars: number;
  readonly official: boolean;
}

/** A registry refused or failed a pull or a search; `notFound` when it answered that the image does not exist. */
export class RegistryError extends RuntimeError {
  constructor(
    message: string,
    readonly notFound: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, false, options);
    this.name = 'RegistryError';
  }
}

export interface OutputChunk {
  readonly stream: 'stdout' | 'stderr';
  readonly data: Buffer;
}

export interface ContainerSummary {
  readonly id: string;
  readonly names: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

export interface ContainerRuntime {
  ping(): Promise<void>;
  createContainer(spec: ContainerSpec): Promise<string>;
  startContainer(id: string): Promise<void>;
  /** Changes a running container's CPU weight (cgroup shares), e.g. once a pre-started engine is claimed. */
  setCpuShares(id: string, shares: number): Promise<void>;
  /** Gives a container a new name (a claimed pooled engine becomes its run's); false when it is gone. */
  renameContainer(id: string, name: string): Promise<boolean>;
  /** Follows stdout/stderr through the container's log, from its start until it exits or the signal aborts. */
  followOutput(id: string, signal: AbortSignal): AsyncIterable<OutputChunk>;
  /**
   * Attaches to stdout/stderr only (call before start to miss nothing): output arrives as it is written
   * and the stream ends when the container exits, where following the log adds Podman's polling delay.
   */
  attachOutput(id: string): Promise<{ readonly output: AsyncIterable<OutputChunk>; close(): void }>;
  /** Attaches to stdin/stdout/stderr of a container created with `interactive`; call before start to miss nothing. */
  attach(id: string): Promise<AttachedContainer>;
  waitContainer(id: string): Promise<ContainerExit>;
  /** The container's state, or undefined when there is no such container. */
  inspectContainer(nameOrId: string): Promise<ContainerState | undefined>;
  killContainer(id: string, signal?: string): Promise<void>;
  /** Forced removal; succeeds when the container is already gone. */
  removeContainer(id: string): Promise<void>;
  listContainers(label: string): Promise<ContainerSummary[]>;
  /**
   * Mounts the image's files on the host and keeps them mounted until release(), through a container
   * that is created with these labels and never started.
   */
  mountImageTree(image: string, holder: { readonly name: string; readonly labels: Readonly<Record<string, string>> }): Promise<MountedImageTree>;
  inspectImage(reference: string): Promise<ImageInfo | undefined>;
  /** Which of the paths exist in the image's filesystem: one probe container, one HEAD per path. */
  existingImagePaths(reference: string, paths: readonly string[]): Promise<Set<string>>;
  listImages(): Promise<ImageSummary[]>;
  /** Pulls from the registry the reference names; throws RegistryError when the registry fails it. */
  pullImage(reference: string, options: PullOptions): Promise<PulledImage>;
  /** Searches registries for the term (`host:port/term` searches that registry only). */
  searchImages(term: string, options: { readonly limit: number; readonly tlsVerify: boolean }): Promise<RegistrySearchResult[]>;
  /** The subnets (CIDR) of a network, e.g. ["10.88.0.0/16"]; empty for `none` or a network without any. */
  networkSubnets(name: string): Promise<string[]>;
  /** The gateway addresses of a network (empty for `none`). */
  networkGateways(name: string): Promise<string[]>;
  createServiceContainer(spec: ServiceContainerSpec): Promise<string>;
  /** Runs the container's healthcheck once, now, and answers the status it leaves. */
  runHealthcheck(id: string): Promise<HealthStatus>;
  /** The last `lines` lines of the container's stdout and stderr. */
  logTail(id: string, lines: number, options?: LogTailOptions): Promise<string>;
  /** Builds an image from a context directory; rejects with the build's own error, or BuildTimeoutError. */
  buildImage(options: BuildOptions): Promise<string>;
  /** Removes an image; false when it is still used by a container (it is then kept). */
  removeImage(reference: string): Promise<boolean>;
  /**
   * A stack network: no route out, no DNS server (its containers know each other from their /etc/hosts:
   * fixed addresses, NetworkAttachment.address), and where the host allows it (rootful) reachable only from
   * its own containers, which reach on the host only Berth's gateway port (runtime/podman/network-isolation.ts).
   */
  createNetwork(name: string, labels: Readonly<Record<string, string>>): Promise<StackNetwork>;
  removeNetwork(name: string): Promise<void>;
  /**
   * The network engine containers sit on (runtime/podman/agent-network.ts): found, or created with these
   * labels, without DNS and, when `internal`, without a route out. Throws, with a message naming
   * SERVICE_AGENT_NETWORK, when the existing one has a route out though `internal` was asked for.
   */
  ensureAgentNetwork(name: string, labels: Readonly<Record<string, string>>, options: { readonly internal: boolean }): Promise<AgentNetwork>;
  /** Removes the agent network unless a container still uses it (then false: it is left for the next start). */
  releaseAgentNetwork(name: string): Promise<boolean>;
  listNetworks(label: string): Promise<NetworkSummary[]>;
  /**
   * `backingDir` (a directory as Berth sees it, e.g. on a stack's disk): holds the volume's data instead of
   * Podman's storage; it is bind-mounted onto the volume's own directory, so Podman still copies the image's
   * content up into it and gives it to the container's user. Unbound again by removeVolume.
   */
  createVolume(name: string, labels: Readonly<Record<string, string>>, backingDir?: string): Promise<void>;
  /** Removes the volume (unbinding its backing directory first); also when a container still uses it. */
  removeVolume(name: string): Promise<void>;
  listVolumes(label: string): Promise<LabelledObject[]>;
  secretExists(name: string): Promise<boolean>;
  /** The id of the secret of exactly this name (a secret removed and created again has a new one). */
  secretId(name: string): Promise<string | undefined>;
  listSecrets(): Promise<string[]>;
  createSecret(name: string, value: string): Promise<void>;
  /** The value of a secret (the model credential Berth forwards; Podman 4.3 has no API to show it). */
  readSecret(name: string): Promise<string>;
  removeSecret(name: string): Promise<void>;
}
