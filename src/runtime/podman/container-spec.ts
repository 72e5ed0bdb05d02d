// Maps Berth's ContainerSpec to libpod's SpecGenerator JSON. Hardening that applies to every agent
// container is fixed here, not left to callers: no capabilities, no new privileges, a pids limit,
// private namespaces (a user namespace too: container root is never host root), runc and explicit
// ulimits (crun and Podman's default ulimits fail on these hosts).
import type { ContainerSpec } from '../container-runtime.js';

const CPU_PERIOD_US = 100_000;

export function toSpecGenerator(spec: ContainerSpec): Record<string, unknown> {
  return {
    name: spec.name,
    image: spec.image,
    command: spec.command,
    env: spec.env,
    work_dir: spec.workdir,
    create_working_dir: spec.createWorkdir,
    labels: spec.labels,
    mounts: spec.bindMounts.map((mount) => ({
      Type: 'bind',
      Source: mount.hostPath,
      Destination: mount.containerPath,
      // nosuid,nodev on every bind mount: a caller's files must never become setuid binaries or devices.
      // Caller volumes arrive as staging mounts without submounts (runtime/volume-staging.ts), so these
      // flags hold for everything below them; a non-recursive `bind` would be refused in a user namespace.
      Options: [mount.readOnly ? 'ro' : 'rw', ...new Set([...mount.options, 'nosuid', 'nodev']), 'rbind'],
    })),
    // Secrets are files, not environment variables: libpod copies secret_env values into the
    // container's inspect data, where anyone with access to the socket could read them.
    secrets: spec.secretFiles.map((file) => ({ Source: file.secret, Target: file.containerPath, Mode: 0o444 })),
    resource_limits: {
      memory: { limit: spec.memoryBytes, swap: spec.memoryBytes },
      cpu: { quota: Math.round(spec.cpus * CPU_PERIOD_US), period: CPU_PERIOD_US, shares: spec.cpuShares },
      pids: { limit: spec.pidsLimit },
    },
    oci_runtime: 'runc',
    r_limits: [
      { type: 'nofile', hard: 1024, soft: 1024 },
      { type: 'nproc', hard: 4096, soft: 4096 },
    ],
    cap_drop: ['ALL'],
    no_new_privileges: true,
    privileged: false,
    netns: spec.network === 'none' ? { nsmode: 'none' } : { nsmode: 'bridge' },
    ...(spec.network === 'none' ? {} : { Networks: { [spec.network]: {} } }),
    ...userNamespace(spec),
    pidns: { nsmode: 'private' },
    ipcns: { nsmode: 'private' },
    utsns: { nsmode: 'private' },
    stdin: spec.interactive === true,
    terminal: false,
    remove: false,
  };
}

function userNamespace(spec: ContainerSpec): Record<string, unknown> {
  if (spec.userNamespace.kind === 'rootless') return {};
  const map = [{ container_id: 0, host_id: spec.userNamespace.hostBase, size: spec.userNamespace.size }];
  return {
    userns: { nsmode: 'private' },
    idmappings: { HostUIDMapping: false, HostGIDMapping: false, UIDMap: map, GIDMap: map, AutoUserNs: false },
  };
}
