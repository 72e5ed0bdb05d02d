// What a container is made from, in Berth's terms: an engine's container (ContainerSpec) and a compose
// stack's service container (ServiceContainerSpec), with the mounts, networks and user namespace they share.
// runtime/podman/container-spec.ts maps them onto libpod's SpecGenerator.

import type { ContainerKind } from '../container-policy.js';

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
