// Maps Berth's ContainerSpec to libpod's SpecGenerator JSON. The hardening of every container comes from
// the one container policy (runtime/container-policy.ts) through hardening() below, for engine containers
// and a stack's services alike: capabilities, no new privileges, the user namespace, private namespaces,
// runc and explicit ulimits (crun and Podman's default ulimits fail on these hosts).
import type { BindMount, ContainerSpec, NetworkAttachment, ServiceContainerSpec, UserNamespace, VolumeMountSpec } from '../ports/container-specs.js';
import { CONTAINER_POLICY, CONTAINER_ULIMITS, type ContainerKind } from '../container-policy.js';

const CPU_PERIOD_US = 100_000;

export function toSpecGenerator(spec: ContainerSpec): Record<string, unknown> {
  return {
    name: spec.name,
    image: spec.image,
    command: spec.command,
    env: spec.env,
    work_dir: spec.workdir,
    create_working_dir: spec.createWorkdir,
    ...(spec.user !== undefined ? { user: spec.user } : {}),
    labels: { ...spec.labels, [KIND_LABEL]: spec.kind },
    mounts: spec.bindMounts.map(bindMount),
    volumes: (spec.volumeMounts ?? []).map(namedVolume),
    // Secrets are files, not environment variables: libpod copies secret_env values into the
    // container's inspect data, where anyone with access to the socket could read them.
    secrets: spec.secretFiles.map((file) => ({ Source: file.secret, Target: file.containerPath, Mode: 0o444 })),
    ...limits(spec.memoryBytes, spec.cpus, spec.cpuShares, spec.pidsLimit),
    ...hardening(spec.kind, spec.userNamespace),
    ...networks(spec.network === 'none' ? [] : [{ name: spec.network, aliases: [] }], spec.stackNetwork),
    ...hostEntries(spec.hostEntries),
    stdin: spec.interactive === true,
    terminal: false,
    remove: false,
    // read_write_tmpfs stays off: Podman's tmpfs on /run, /tmp and /var/tmp would be writable beside the disk.
    ...(spec.readOnlyRootfs === true ? { read_only_filesystem: true } : {}),
  };
}

/** A compose service's container: see ServiceContainerSpec for what differs from an engine container. */
export function toServiceSpecGenerator(spec: ServiceContainerSpec): Record<string, unknown> {
  const { privileges } = spec;
  return {
    name: spec.name,
    image: spec.image,
    ...(spec.command ? { command: spec.command } : {}),
    ...(spec.entrypoint ? { entrypoint: spec.entrypoint } : {}),
    env: spec.env,
    ...(spec.workdir !== undefined ? { work_dir: spec.workdir } : {}),
    ...(spec.user !== undefined ? { user: spec.user } : {}),
    ...(spec.hostname !== undefined ? { hostname: spec.hostname } : {}),
    labels: { ...spec.labels, [KIND_LABEL]: 'stack-service' },
    mounts: spec.bindMounts.map(bindMount),
    volumes: spec.volumeMounts.map(namedVolume),
    ...limits(spec.memoryBytes, spec.cpus, 1024, spec.pidsLimit),
    ...(spec.healthcheck
      ? {
          healthconfig: {
            Test: spec.healthcheck.test,
            Interval: spec.healthcheck.intervalMs * 1e6,
            Timeout: spec.healthcheck.timeoutMs * 1e6,
            StartPeriod: spec.healthcheck.startPeriodMs * 1e6,
            Retries: spec.healthcheck.retries,
          },
        }
      : {}),
    ...(spec.restart !== 'no' ? { restart_policy: spec.restart } : {}),
    ...hardening('stack-service', spec.userNamespace),
    // What the operator allowed a service to give up (SERVICE_COMPOSE_ALLOW_PRIVILEGED, _HOST_NETWORK), over the policy.
    ...(privileges.privileged ? { privileged: true, no_new_privileges: false, cap_drop: [] } : {}),
    ...(privileges.capAdd.length > 0 ? { cap_add: [...CONTAINER_POLICY['stack-service'].capabilities, ...privileges.capAdd] } : {}),
    ...(privileges.devices.length > 0 ? { devices: privileges.devices.map((device) => ({ path: device })) } : {}),
    ...(privileges.seccompUnconfined ? { seccomp_profile_path: 'unconfined' } : {}),
    ...(privileges.apparmorUnconfined ? { apparmor_profile: 'unconfined' } : {}),
    ...(privileges.labelDisable ? { selinux_opts: ['disable'] } : {}),
    ...(privileges.hostNetwork ? { netns: { nsmode: 'host' } } : { ...networks([], spec.network), ...hostEntries(spec.hostEntries) }),
    ...(privileges.hostPid ? { pidns: { nsmode: 'host' } } : {}),
    ...(privileges.hostIpc ? { ipcns: { nsmode: 'host' } } : {}),
    stdin: false,
    terminal: false,
    remove: false,
    // A service writes only where the stack gives it room (core/compose/stacks.ts: its named volumes and its
    // /tmp, /var/tmp and /run, all on the stack's disk); without Podman's tmpfs beside them. The image's own
    // VOLUMEs become tmpfs (pages counted in the service's memory limit), never unbounded anonymous volumes.
    read_only_filesystem: true,
    image_volume_mode: 'tmpfs',
  };
}

/**
 * A container's log, capped: conmon starts the file afresh when the next line would pass `maxBytes`, so
 * output the engine or a service floods is bounded on disk and in what Berth reads back. k8s-file
 * explicitly: journald would ignore the cap.
 */
export function logConfiguration(maxBytes: number | undefined): Record<string, unknown> {
  return maxBytes === undefined ? {} : { log_configuration: { driver: 'k8s-file', size: maxBytes } };
}

/** On every container Berth creates: which row of the container policy it was hardened by. */
export const KIND_LABEL = 'berth.kind';

/**
 * The policy's row for a kind, as libpod fields: every capability dropped and the row's own added back, no
 * new privileges, never privileged, the user namespace, private PID, IPC and UTS namespaces (the network
 * namespace is the caller's: networks()).
 */
function hardening(kind: ContainerKind, namespace: UserNamespace): Record<string, unknown> {
  const row = CONTAINER_POLICY[kind];
  return {
    cap_drop: ['ALL'],
    ...(row.capabilities.length > 0 ? { cap_add: [...row.capabilities] } : {}),
    no_new_privileges: row.noNewPrivileges,
    privileged: false,
    ...userNamespace(namespace),
    pidns: { nsmode: 'private' },
    ipcns: { nsmode: 'private' },
    utsns: { nsmode: 'private' },
  };
}

function bindMount(mount: BindMount): Record<string, unknown> {
  return {
    Type: 'bind',
    Source: mount.hostPath,
    Destination: mount.containerPath,
    // nosuid,nodev on every bind mount: a caller's files must never become setuid binaries or devices.
    // Caller volumes arrive as staging mounts without submounts (runtime/volume-staging.ts), so these
    // flags hold for everything below them; a non-recursive `bind` would be refused in a user namespace.
    Options: [mount.readOnly ? 'ro' : 'rw', ...new Set([...mount.options, 'nosuid', 'nodev']), 'rbind', ...(mount.receivesHostMounts === true ? ['rslave'] : [])],
  };
}

function namedVolume(mount: VolumeMountSpec): Record<string, unknown> {
  return { Name: mount.volume, Dest: mount.containerPath, Options: [mount.readOnly ? 'ro' : 'rw', 'nosuid', 'nodev'] };
}

/** Runc and explicit ulimits: crun and Podman's default ulimits fail on these hosts. */
function limits(memoryBytes: number, cpus: number, cpuShares: number, pidsLimit: number): Record<string, unknown> {
  return {
    resource_limits: {
      memory: { limit: memoryBytes, swap: memoryBytes },
      cpu: { quota: Math.round(cpus * CPU_PERIOD_US), period: CPU_PERIOD_US, shares: cpuShares },
      pids: { limit: pidsLimit },
    },
    oci_runtime: 'runc',
    r_limits: [
      { type: 'nofile', hard: CONTAINER_ULIMITS.nofile, soft: CONTAINER_ULIMITS.nofile },
      { type: 'nproc', hard: CONTAINER_ULIMITS.nproc, soft: CONTAINER_ULIMITS.nproc },
    ],
  };
}

/** The networks a container joins; none at all is its own empty network namespace. */
function networks(base: readonly NetworkAttachment[], extra: NetworkAttachment | undefined): Record<string, unknown> {
  const all = [...base, ...(extra ? [extra] : [])];
  if (all.length === 0) return { netns: { nsmode: 'none' } };
  return {
    netns: { nsmode: 'bridge' },
    Networks: Object.fromEntries(all.map((network) => [network.name, {
      ...(network.aliases.length > 0 ? { aliases: network.aliases } : {}),
      ...(network.address !== undefined ? { static_ips: [network.address] } : {}),
    }])),
  };
}

/** /etc/hosts entries that win over Podman's own. */
function hostEntries(entries: readonly { readonly host: string; readonly address: string }[] | undefined): Record<string, unknown> {
  return entries && entries.length > 0 ? { hostadd: entries.map((entry) => `${entry.host}:${entry.address}`) } : {};
}

function userNamespace(userNamespace: UserNamespace): Record<string, unknown> {
  if (userNamespace.kind === 'rootless') return {};
  const map = [{ container_id: 0, host_id: userNamespace.hostBase, size: userNamespace.size }];
  return {
    userns: { nsmode: 'private' },
    idmappings: { HostUIDMapping: false, HostGIDMapping: false, UIDMap: map, GIDMap: map, AutoUserNs: false },
  };
}
