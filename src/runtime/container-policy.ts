// The one container policy: what every container Berth creates gets, and the few documented differences
// per kind. Both of libpod's create paths (runtime/podman/container-spec.ts) and the build's steps
// (runtime/podman/rootless-build.ts) take their hardening from here, so a new kind of container cannot be
// created without deciding its row; docs/security.md lists the same table, and
// test/integration/container-policy.test.ts inspects one live container of each kind against it.

/** Every kind of container Berth creates. */
export type ContainerKind = 'run' | 'pooled-engine' | 'agent' | 'stack-service' | 'build-step' | 'workspace-clone';

/**
 * The capabilities a stack's service keeps: a database changes file owners and switches users. Podman's
 * own default set of Podman 4.x (containers.conf `default_capabilities`), written out because Debian's
 * containers.conf adds NET_RAW, MKNOD and AUDIT_WRITE to it.
 */
export const SERVICE_CAPABILITIES = [
  'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT',
] as const;

/** The ulimits of every container (explicit: Podman's defaults cannot be set on these hosts). */
export const CONTAINER_ULIMITS = { nofile: 1024, nproc: 4096 } as const;

export interface KindPolicy {
  /** Capabilities kept (effective and bounding); every other one is dropped. */
  readonly capabilities: readonly string[];
  /**
   * no-new-privileges. Podman 4.3 refuses it for build steps ("no-new-privileges is not supported"): there
   * root is the unprivileged build user, so a setuid binary gains nothing outside the build's namespace.
   */
  readonly noNewPrivileges: boolean;
  /** Who container root is on the host: the mapped range (SERVICE_AGENT_USERNS_BASE), or the build user. */
  readonly userNamespace: 'mapped' | 'build-user';
  /** What the container can write, each bounded by the file system (runtime/run-disk.ts, stack-disk.ts). */
  readonly writes: 'run-disk' | 'stack-disk' | 'build-disk' | 'workspace-tree';
  /** The networks it joins (runtime/podman/network-isolation.ts keeps callers apart on them). */
  readonly network: 'agent-network' | 'stack-network' | 'none';
  /** The engine image's files, read-only at /opt/claude. */
  readonly engineMount: boolean;
}

const ENGINE: KindPolicy = {
  capabilities: [],
  noNewPrivileges: true,
  userNamespace: 'mapped',
  writes: 'run-disk',
  network: 'agent-network',
  engineMount: true,
};

export const CONTAINER_POLICY: Readonly<Record<ContainerKind, KindPolicy>> = {
  run: ENGINE,
  'pooled-engine': ENGINE,
  agent: ENGINE,
  'stack-service': { capabilities: SERVICE_CAPABILITIES, noNewPrivileges: true, userNamespace: 'mapped', writes: 'stack-disk', network: 'stack-network', engineMount: false },
  'build-step': { capabilities: SERVICE_CAPABILITIES, noNewPrivileges: false, userNamespace: 'build-user', writes: 'build-disk', network: 'none', engineMount: false },
  // `git clone` of POST /workspaces {"git"} (core/workspaces/git-clone.ts): its root file system read-only,
  // it writes only the new workspace's tree (the workspace's own disk), under the runs' egress rules.
  'workspace-clone': { capabilities: [], noNewPrivileges: true, userNamespace: 'mapped', writes: 'workspace-tree', network: 'agent-network', engineMount: false },
};

/** Podman's command-line options that give a build step its row's capabilities (all dropped, its own added back). */
export function buildStepCapabilityOptions(): string[] {
  return ['--cap-drop=ALL', `--cap-add=${CONTAINER_POLICY['build-step'].capabilities.join(',')}`];
}
