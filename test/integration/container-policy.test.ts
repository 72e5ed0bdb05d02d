// One container policy for every container Berth creates (issue 23): a run, a pooled engine, an agent, a
// compose stack's service and a build step each get their user namespace, capabilities, no-new-privileges,
// namespaces, mounts and limits from one place, with the few differences per kind the table below lists.
// One real Berth starts one of each kind; each is inspected from the host while it is alive (podman
// inspect, /proc/<pid>/status, uid_map, namespaces, mountinfo, its cgroup, statfs, conmon's command line,
// and reachability from inside it), the build step from what its own RUN step recorded. The table is the
// policy as documented: a check fails when a container differs from its row.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readlink, rm, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { poolReady, stackResourcesOf, type TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';

const exec = promisify(execFile);
const MIB = 1024 * 1024;
const REDIS = 'localhost/berth-test-redis:bookworm';
/** A busybox-only image of 3 MB: a build on it is quick, and its files are few to map into a user namespace. */
const TINY = 'localhost/berth-test-musl:latest';

type Kind = 'run' | 'pooled' | 'agent' | 'service' | 'build';

/** Podman's default capability set (containers.conf default_capabilities), as bits of CapEff/CapBnd. */
const PODMAN_DEFAULT_CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'];
const CAP_BITS: Record<string, number> = {
  CHOWN: 0, DAC_OVERRIDE: 1, DAC_READ_SEARCH: 2, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, SETPCAP: 8, NET_BIND_SERVICE: 10,
  NET_ADMIN: 12, NET_RAW: 13, SYS_MODULE: 16, SYS_CHROOT: 18, SYS_PTRACE: 19, SYS_ADMIN: 21, MKNOD: 27, AUDIT_WRITE: 29, SETFCAP: 31,
};

/** The settings of the test Berth the policy's values come from. */
const SETTINGS = {
  SERVICE_POOL_SIZE: '1',
  SERVICE_AGENT_POOL_SIZE: '0',
  SERVICE_AGENT_DEFAULT_MEMORY: '512m',
  SERVICE_AGENT_MAX_MEMORY: '2g',
  SERVICE_AGENT_DEFAULT_CPUS: '1',
  SERVICE_AGENT_PIDS_LIMIT: '512',
  SERVICE_AGENT_DEFAULT_DISK: '1g',
  // A run's workdir is its session's workspace, a file system of this size (docs/workspaces.md).
  SERVICE_WORKSPACE_MAX_BYTES: '1g',
  // The same bound for every kind: a stack's services write only to their stack's disk, a build only to its sandbox's.
  SERVICE_COMPOSE_STACK_DISK: '1g',
  SERVICE_COMPOSE_BUILD_DISK: '1g',
  SERVICE_CONTAINER_LOG_MAX_BYTES: '4m',
  SERVICE_COMPOSE_ALLOW_BUILD: 'true',
  SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
};

/** The memory a run asks for: not the pool's default, so the run gets a fresh container of its own. */
const RUN_MEMORY = 384 * MIB;

interface PolicyRow {
  /** Container root is not host root: uid_map maps 0 to an unprivileged host range. */
  readonly userNamespace: 'mapped';
  /** Capabilities (effective and bounding sets): none at all, or at most Podman's default set. */
  readonly capabilities: 'none' | 'podman-default';
  /** NoNewPrivs 1 on every process (false: a documented exception, not checked). */
  readonly noNewPrivileges: boolean;
  /** Namespaces that must differ from the host's. */
  readonly privateNamespaces: readonly string[];
  readonly pidsLimit: number;
  readonly memoryBytes: { readonly exactly: number } | { readonly atMost: number };
  readonly cpuQuotaUs: number | 'any';
  /** Largest file system it can write to (/, the workdir, /tmp, /var/tmp; a read-only one does not count). */
  readonly diskBytesAtMost: number;
  /** conmon's --log-size-max; null where there is no container log (a build step's output is read as it streams). */
  readonly logMaxBytes: number | null;
  /** The engine image's files, read-only at /opt/claude. */
  readonly engineMountReadOnly: boolean;
  /** nosuid and nodev on every bind mount and volume. */
  readonly bindMountsNosuidNodev: true;
  /** Network: engines on their caller's own network; a stack's services reachable only from the stack's agent; builds offline. */
  readonly network: 'own-caller' | 'stack-only' | 'none';
}

const DISK = 1024 * MIB;
const ENGINE: Omit<PolicyRow, 'memoryBytes'> = {
  userNamespace: 'mapped',
  capabilities: 'none',
  noNewPrivileges: true,
  privateNamespaces: ['pid', 'ipc', 'uts', 'net', 'mnt', 'user'],
  pidsLimit: 512,
  cpuQuotaUs: 100_000,
  diskBytesAtMost: DISK,
  logMaxBytes: 4 * MIB,
  engineMountReadOnly: true,
  bindMountsNosuidNodev: true,
  network: 'own-caller',
};

/**
 * The policy, per kind of container. Differences: services and build steps keep Podman's default
 * capabilities inside their user namespace (images' init scripts and RUN steps such as apt-get need
 * them); build steps run without no-new-privileges (below); services join only their stack's network; a build step has no network, no container log, no
 * engine, and a memory limit up to SERVICE_AGENT_MAX_MEMORY.
 */
const POLICY: Record<Kind, PolicyRow> = {
  run: { ...ENGINE, memoryBytes: { exactly: RUN_MEMORY } },
  pooled: { ...ENGINE, memoryBytes: { exactly: 512 * MIB } },
  agent: { ...ENGINE, memoryBytes: { exactly: 512 * MIB } },
  service: { ...ENGINE, capabilities: 'podman-default', memoryBytes: { exactly: 512 * MIB }, engineMountReadOnly: false, network: 'stack-only' },
  // No no-new-privileges for build steps: Podman 4.3 refuses it for builds ("no-new-privileges is not
  // supported"); root in a step is the unprivileged build user (the user-namespace check), so a setuid binary
  // gains nothing outside the build's namespace (docs/security.md, the policy table).
  build: { ...ENGINE, capabilities: 'podman-default', noNewPrivileges: false, memoryBytes: { atMost: 2048 * MIB }, cpuQuotaUs: 'any', logMaxBytes: null, engineMountReadOnly: false, network: 'none' },
};

/** What is found about one container, in the policy's terms. */
interface Observed {
  readonly uidMap: string;
  readonly capEff: bigint[];
  /** The bounding set: what a process could still gain (through a setuid or file-capability binary). */
  readonly capBnd: bigint[];
  readonly noNewPrivs: string[];
  readonly namespaces: Record<string, string>;
  readonly pidsMax: string;
  readonly memoryBytes: number;
  readonly cpuQuotaUs: number | undefined;
  readonly diskBytes: Record<string, number>;
  readonly logMaxBytes: number | undefined;
  /** Mount point → options (mountinfo's per-mount and super-block options together). */
  readonly mounts: Map<string, string[]>;
  /** Bind mounts and volumes Podman lists for it. */
  readonly binds: string[];
  readonly interfaces: string[];
}

const UNLIMITED = Number.MAX_SAFE_INTEGER;

// ── reading a live container from the host ────────────────────────────────────────────────────────────

async function podman(...args: string[]): Promise<string> {
  return (await exec('podman', args, { maxBuffer: 16 * MIB })).stdout;
}

async function cgroupVersion(): Promise<1 | 2> {
  return (await statfs('/sys/fs/cgroup')).type === 0x63677270 ? 2 : 1;
}

/** Reads a cgroup file of `pid`'s controller (v1: /sys/fs/cgroup/<controller><path>/<file>; v2: <path>/<file2>). */
async function cgroupFile(pid: number, controller: string, v1File: string, v2File: string): Promise<string | undefined> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n').filter(Boolean);
  if ((await cgroupVersion()) === 2) {
    const path = lines.find((line) => line.startsWith('0::'))?.slice(3);
    return path === undefined ? undefined : readFile(`/sys/fs/cgroup${path}/${v2File}`, 'utf8').then((s) => s.trim(), () => undefined);
  }
  for (const line of lines) {
    const [, controllers, path] = line.split(':');
    if (!controllers?.split(',').includes(controller)) continue;
    for (const dir of [controllers, controller]) {
      const value = await readFile(`/sys/fs/cgroup/${dir}${path}/${v1File}`, 'utf8').then((s) => s.trim(), () => undefined);
      if (value !== undefined) return value;
    }
  }
  return undefined;
}

/** The options of the mount `path` is on: the longest mount point that contains it. */
function mountOf(mounts: ReadonlyMap<string, string[]>, path: string): string[] | undefined {
  const containing = [...mounts.keys()].filter((point) => point === '/' || path === point || path.startsWith(`${point}/`));
  const nearest = containing.sort((a, b) => b.length - a.length)[0];
  return nearest === undefined ? undefined : mounts.get(nearest);
}

function parseMountinfo(text: string): Map<string, string[]> {
  const mounts = new Map<string, string[]>();
  for (const line of text.split('\n').filter(Boolean)) {
    const [head, tail] = line.split(' - ');
    const fields = head!.split(' ');
    const superOptions = tail?.split(' ')[2]?.split(',') ?? [];
    mounts.set(fields[4]!, [...fields[5]!.split(','), ...superOptions]);
  }
  return mounts;
}

/** Capability names of a bit set (numbers for those this test has no name for). */
function capNames(bits: bigint): string {
  const names: string[] = [];
  for (let bit = 0n; bit < 64n; bit++) {
    if ((bits >> bit) & 1n) names.push(Object.entries(CAP_BITS).find(([, n]) => BigInt(n) === bit)?.[0] ?? String(bit));
  }
  return names.join(',');
}

function capBits(hex: string): bigint {
  return BigInt(`0x${hex}`);
}

/** Everything the policy speaks of, read from the host about container `name` (running). */
async function observe(name: string, workdir: string): Promise<Observed> {
  const [info] = JSON.parse(await podman('inspect', name)) as any[];
  const pid: number = info.State.Pid;
  assert.ok(pid > 0, `${name} is running`);
  const hostPids = (await podman('top', name, 'hpid')).split('\n').slice(1).map((line) => Number(line.trim())).filter((n) => n > 0);
  const statuses = await Promise.all(hostPids.map((p) => readFile(`/proc/${p}/status`, 'utf8').catch(() => '')));
  const field = (status: string, key: string) => new RegExp(`^${key}:\\s*(\\S+)`, 'm').exec(status)?.[1];
  const namespaces: Record<string, string> = {};
  for (const ns of ['pid', 'ipc', 'uts', 'net', 'mnt', 'user']) namespaces[ns] = await readlink(`/proc/${pid}/ns/${ns}`);
  const memory = await cgroupFile(pid, 'memory', 'memory.limit_in_bytes', 'memory.max');
  const quota = await cgroupFile(pid, 'cpu', 'cpu.cfs_quota_us', 'cpu.max');
  const diskBytes: Record<string, number> = {};
  for (const path of ['/', workdir, '/tmp', '/var/tmp']) {
    const fs = await statfs(`/proc/${pid}/root${path}`).catch(() => undefined);
    if (fs) diskBytes[path] = fs.blocks * fs.bsize;
  }
  const conmon = info.State.ConmonPid ? (await readFile(`/proc/${info.State.ConmonPid}/cmdline`, 'utf8')).split('\0') : [];
  const logAt = conmon.indexOf('--log-size-max');
  const interfaces = (await readFile(`/proc/${pid}/net/dev`, 'utf8')).split('\n').slice(2).map((l) => l.split(':')[0]!.trim()).filter(Boolean);
  return {
    uidMap: (await readFile(`/proc/${pid}/uid_map`, 'utf8')).trim(),
    capEff: statuses.filter(Boolean).map((s) => capBits(field(s, 'CapEff') ?? 'ffffffffffffffff')),
    capBnd: statuses.filter(Boolean).map((s) => capBits(field(s, 'CapBnd') ?? 'ffffffffffffffff')),
    noNewPrivs: statuses.filter(Boolean).map((s) => field(s, 'NoNewPrivs') ?? 'absent'),
    namespaces,
    pidsMax: (await cgroupFile(pid, 'pids', 'pids.max', 'pids.max')) ?? 'unreadable',
    memoryBytes: memory === undefined || memory === 'max' ? UNLIMITED : Math.min(Number(memory), UNLIMITED),
    cpuQuotaUs: quota === undefined ? undefined : Number(quota.split(' ')[0]) || undefined,
    diskBytes,
    logMaxBytes: logAt >= 0 ? Number(conmon[logAt + 1]) : undefined,
    mounts: parseMountinfo(await readFile(`/proc/${pid}/mountinfo`, 'utf8')),
    binds: (info.Mounts as { Type: string; Destination: string }[]).filter((m) => m.Type === 'bind' || m.Type === 'volume').map((m) => m.Destination),
    interfaces,
  };
}

async function hostNamespaces(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const ns of ['pid', 'ipc', 'uts', 'net', 'mnt', 'user']) out[ns] = await readlink(`/proc/self/ns/${ns}`);
  return out;
}

// ── the checks, one per line of the policy ─────────────────────────────────────────────────────────────

type Check = readonly [name: string, run: () => void | Promise<void>];

function checksFor(kind: Kind, seen: Observed, host: Record<string, string>): Check[] {
  const policy = POLICY[kind];
  const checks: Check[] = [
    ['user namespace: no container uid is host root', () => {
      const ranges = seen.uidMap.split('\n').map((line) => line.trim().split(/\s+/).map(Number)).filter((range) => range.length === 3 && range.every(Number.isFinite));
      assert.ok(ranges.length > 0, `uid_map unreadable: "${seen.uidMap}"`);
      // A range [outside, outside + count) that holds host uid 0 makes some container uid host root.
      const root = ranges.find(([, outside, count]) => outside! === 0 && count! > 0);
      assert.equal(root, undefined, `uid_map maps a container uid to host root: ${seen.uidMap.replace(/\s+/g, ' ')}`);
    }],
    [`capabilities: ${policy.capabilities}`, () => {
      const allowed = policy.capabilities === 'none' ? 0n : PODMAN_DEFAULT_CAPS.reduce((mask, cap) => mask | (1n << BigInt(CAP_BITS[cap]!)), 0n);
      assert.ok(seen.capEff.length > 0, 'no process read');
      for (const [set, all] of [['CapEff', seen.capEff], ['CapBnd', seen.capBnd]] as const) {
        for (const caps of all) assert.equal(caps & ~allowed, 0n, `${set} ${caps.toString(16)} has ${capNames(caps & ~allowed)} beyond ${policy.capabilities}`);
      }
    }],
    [`private namespaces: ${policy.privateNamespaces.join(', ')}`, () => {
      for (const ns of policy.privateNamespaces) {
        assert.match(seen.namespaces[ns] ?? '', /^\w+:\[\d+\]$/, `the ${ns} namespace unreadable`);
        assert.notEqual(seen.namespaces[ns], host[ns], `the ${ns} namespace is the host's`);
      }
    }],
    [`pids limit ${policy.pidsLimit}`, () => assert.equal(seen.pidsMax, String(policy.pidsLimit), `pids.max: ${seen.pidsMax}`)],
    [`memory limit ${JSON.stringify(policy.memoryBytes)}`, () => {
      if ('exactly' in policy.memoryBytes) assert.equal(seen.memoryBytes, policy.memoryBytes.exactly, `memory limit ${seen.memoryBytes}`);
      else assert.ok(seen.memoryBytes <= policy.memoryBytes.atMost, `memory limit ${seen.memoryBytes} above ${policy.memoryBytes.atMost}`);
    }],
    [`disk: / and the places it writes (workdir, /tmp, /var/tmp) read-only or on file systems of at most ${policy.diskBytesAtMost} bytes`, () => {
      assert.ok(Object.keys(seen.diskBytes).length > 0, 'no file system read');
      // 5% for the file system's own metadata.
      const unbounded = Object.entries(seen.diskBytes).filter(([path, bytes]) => bytes > policy.diskBytesAtMost * 1.05 && !mountOf(seen.mounts, path)?.includes('ro'));
      assert.ok(unbounded.length === 0, unbounded.map(([path, bytes]) => `${path} writable on ${(bytes / 2 ** 30).toFixed(1)} GiB`).join(', '));
    }],
  ];
  if (policy.noNewPrivileges) {
    checks.push(['no-new-privileges on every process', () => {
      assert.ok(seen.noNewPrivs.length > 0 && seen.noNewPrivs.every((value) => value === '1'), `NoNewPrivs: ${seen.noNewPrivs.join(', ')}`);
    }]);
  }
  if (policy.cpuQuotaUs !== 'any') checks.push([`CPU quota ${policy.cpuQuotaUs} µs per 100 ms`, () => assert.equal(seen.cpuQuotaUs, policy.cpuQuotaUs, `CPU quota ${seen.cpuQuotaUs}`)]);
  if (policy.logMaxBytes !== null) checks.push([`log size cap ${policy.logMaxBytes} bytes`, () => assert.equal(seen.logMaxBytes, policy.logMaxBytes, `conmon's --log-size-max: ${seen.logMaxBytes ?? 'none'}`)]);
  if (policy.network === 'none') {
    checks.push(['no network: only the loopback interface', () => assert.ok(seen.interfaces.join() === 'lo', `interfaces: ${seen.interfaces.join(', ')}`)]);
  }
  if (policy.engineMountReadOnly) {
    checks.push(['the engine at /opt/claude, read-only', () => {
      const options = seen.mounts.get('/opt/claude');
      assert.ok(options, '/opt/claude is not a mount');
      assert.ok(options.includes('ro'), `/opt/claude is mounted ${options.join(',')}`);
    }]);
  }
  if (seen.binds.length > 0) checks.push(['nosuid and nodev on every bind mount and volume', () => {
    for (const destination of seen.binds) {
      const options = seen.mounts.get(destination);
      assert.ok(options, `${destination} not in the mount table`);
      assert.ok(options.includes('nosuid') && options.includes('nodev'), `${destination}: ${options.join(',')}`);
    }
  }]);
  return checks;
}

/** Runs every check; answers the failures (name: why), so one report lists all that differ. */
async function verify(kind: Kind, checks: readonly Check[], extra: readonly Check[] = []): Promise<string[]> {
  const failures: string[] = [];
  for (const [name, run] of [...checks, ...extra]) {
    try {
      await run();
      console.log(`  ✓ ${kind}: ${name}`);
    } catch (error) {
      const why = (error as Error).message.split('\n')[0];
      console.log(`  ✗ ${kind}: ${name}: ${why}`);
      failures.push(`${name}: ${why}`);
    }
  }
  return failures;
}

// ── the test ───────────────────────────────────────────────────────────────────────────────────────────

/** Whether a TCP connection to address:port gets anywhere (a refusal counts as reaching it) from inside `container`. */
async function reaches(container: string, address: string, port: number): Promise<boolean> {
  const script = `timeout 3 bash -c 'exec 3<>/dev/tcp/${address}/${port}' 2>&1; echo "rc=$?"`;
  const out = await podman('exec', container, 'bash', '-c', script).catch((error: { stdout?: string }) => error.stdout ?? '');
  return /rc=0/.test(out) || /Connection refused/.test(out);
}

/**
 * The RUN step's record of itself, copied into the build context as record.sh: its status, uid_map and
 * namespaces, its network interfaces, its cgroup's pids and memory limits (v1 or v2, at the step's own
 * cgroup path or where the runtime mounted it), and the size of / and /tmp. Written into the image at
 * /policy-record; the service started from that image prints it to its log.
 */
const BUILD_RECORD = String.raw`#!/bin/sh
# The base image is busybox alone: its applets as commands first.
busybox --install -s /bin
out=/policy-record
mkdir -p $out
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' ' > $out/status
tr -s ' ' < /proc/self/uid_map | sed 's/^ //' > $out/uid_map
for n in pid ipc uts net mnt user; do echo "$n $(readlink /proc/self/ns/$n)"; done > $out/ns
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > $out/interfaces
cp /proc/self/cgroup $out/cgroup
limit() { # controller v1-file v2-file
  path=$(grep -E "^[0-9]+:([^:]*,)?$1(,[^:]*)?:" /proc/self/cgroup | head -1 | cut -d: -f3)
  v2=$(grep '^0::' /proc/self/cgroup | cut -d: -f3)
  for f in /sys/fs/cgroup/$1$path/$2 /sys/fs/cgroup/$1/$2 /sys/fs/cgroup$v2/$3 /sys/fs/cgroup/$3; do
    if [ -r "$f" ]; then cat "$f"; return; fi
  done
}
limit pids pids.max pids.max > $out/pids
limit memory memory.limit_in_bytes memory.max > $out/memory
df -P / /tmp | tail -n +2 | awk '{ printf "%.0f\n", $2 * 1024 }' > $out/disk
`;

describe('every container Berth creates follows the one container policy', { timeout: 600_000 }, () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  let project: string;
  let host: Record<string, string>;
  const failures: Record<Kind, string[]> = { run: [], pooled: [], agent: [], service: [], build: [] };
  const sessions: string[] = [];
  let agentId: string | undefined;
  /** Alice's stack's Redis and Alice's agent: what other containers must not reach. */
  let cacheAddress: string | undefined;
  let agentAddress: string | undefined;
  const marker = `${process.pid}-${Date.now()}`;

  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'berth-test-policy-'));
    host = await hostNamespaces();
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], { ...SETTINGS, SERVICE_AGENT_ALLOWED_VOLUMES: project }));
    console.log(`  cgroup v${await cgroupVersion()}`);
  });

  after(async () => {
    if (agentId) await t?.request('DELETE', `/agents/${agentId}`, undefined, as('alice')).catch(() => undefined);
    for (const id of sessions) await t?.request('DELETE', `/sessions/${id}`, undefined, as('alice')).catch(() => undefined);
    const left = t ? await t.leftovers() : [];
    await t?.stop();
    // The images this test's build made (kept when SERVICE_COMPOSE_REMOVE_BUILT_IMAGES is false), by their own label.
    const built = (await podman('images', '--filter', `label=berth-test-policy=${marker}`, '--format', '{{.ID}}')).split('\n').filter(Boolean);
    if (built.length > 0) await podman('rmi', '--force', ...new Set(built)).catch(() => undefined);
    await rm(project, { recursive: true, force: true });
    console.log(`\n  container policy, what differs:\n${JSON.stringify(failures, null, 2)}`);
    assert.deepEqual(left, [], 'containers left behind');
    if (t) assert.deepEqual(await stackResourcesOf(t.config.instanceName), { containers: [], volumes: [], networks: [] }, 'stack resources left behind');
  });

  /** A compose file of an agent service `app` and a Redis with a volume, in a directory of the project; answers the run's environment. */
  async function stack(name: string, app: Record<string, unknown>) {
    const dir = join(project, name);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'compose.yaml'), stringify({
      services: {
        app: { ...app, command: 'sleep infinity' },
        cache: { image: REDIS, healthcheck: { test: ['CMD', 'redis-cli', 'ping'], interval: '1s', retries: 30 }, volumes: ['shared:/shared'] },
      },
      volumes: { shared: {} },
    }));
    return { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' };
  }

  test("a stack service (Alice's Redis), reachable from its stack's own agent container", async () => {
    const environment = await stack('service', { image: REDIS });
    const response = await t.request('POST', '/run', { prompt: 'run: redis-cli -h cache ping', container: { environment } }, as('alice'));
    assert.equal(response.status, 200, JSON.stringify(response.body));
    sessions.push(response.body.session_id);
    assert.match(response.body.output, /PONG/, "the stack's agent container reaches its own service");
    const { containers } = await stackResourcesOf(t.config.instanceName);
    const cache = containers.find((name) => name.includes(response.body.session_id) && name.endsWith('-cache'));
    assert.ok(cache, containers.join(', '));
    cacheAddress = await addressOf(cache);
    failures.service = await verify('service', checksFor('service', await observe(cache, '/shared'), host));
    assert.deepEqual(failures.service, [], `the stack service differs from the policy:\n${failures.service.join('\n')}`);
  });

  test("a build step (a stack service's image whose RUN step records what it saw)", async () => {
    const dir = join(project, 'build');
    await mkdir(join(dir, 'recorder'), { recursive: true });
    await writeFile(join(dir, 'recorder', 'record.sh'), BUILD_RECORD);
    await writeFile(join(dir, 'recorder', 'Containerfile'), `FROM ${TINY}\nLABEL berth-test-policy=${marker}\nCOPY record.sh /record.sh\nRUN sh /record.sh\n`);
    await writeFile(join(dir, 'compose.yaml'), stringify({
      services: {
        app: { image: REDIS, command: 'sleep infinity' },
        recorder: {
          build: { context: './recorder', dockerfile: 'Containerfile' },
          // $$: compose interpolates $f otherwise.
          command: ['sh', '-c', 'for f in /policy-record/*; do echo "== $$f"; cat "$$f"; done; echo "== end"; exec sleep 3600'],
        },
      },
    }));
    const environment = { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' };
    const response = await t.request('POST', '/run', { prompt: 'say: built', container: { environment } }, as('alice'));
    if (response.body.session_id) sessions.push(response.body.session_id);
    assert.equal(response.status, 200, `the build or its stack failed: ${JSON.stringify(response.body)}`);
    const { containers } = await stackResourcesOf(t.config.instanceName);
    const recorder = containers.find((name) => name.includes(response.body.session_id) && name.endsWith('-recorder'));
    assert.ok(recorder, containers.join(', '));
    const output = await until(async () => {
      const logged = await podman('logs', recorder);
      return logged.includes('== end') ? logged : undefined;
    }, 30_000);
    console.log(`  the build step recorded:\n${output.replace(/^/gm, '    ')}`);
    const section = (file: string) => new RegExp(`== /policy-record/${file}\\n([\\s\\S]*?)\\n== `).exec(output)?.[1]?.trim() ?? '';
    const status = section('status');
    const build: Observed = {
      uidMap: section('uid_map'),
      capEff: [capBits(/CapEff: (\S+)/.exec(status)?.[1] ?? 'ffffffffffffffff')],
      capBnd: [capBits(/CapBnd: (\S+)/.exec(status)?.[1] ?? 'ffffffffffffffff')],
      noNewPrivs: [/NoNewPrivs: (\S+)/.exec(status)?.[1] ?? 'absent'],
      namespaces: Object.fromEntries(section('ns').split('\n').map((line) => line.split(' ') as [string, string])),
      pidsMax: section('pids') || 'unreadable',
      memoryBytes: Math.min(Number(section('memory') || 'NaN') || UNLIMITED, UNLIMITED),
      cpuQuotaUs: undefined,
      diskBytes: Object.fromEntries(section('disk').split('\n').filter(Boolean).map((size, i) => [i === 0 ? '/' : '/tmp', Number(size)])),
      logMaxBytes: undefined,
      mounts: new Map(),
      binds: [],
      interfaces: section('interfaces').split('\n').filter(Boolean),
    };
    failures.build = await verify('build', checksFor('build', build, host));
    assert.deepEqual(failures.build, [], `the build step differs from the policy:\n${failures.build.join('\n')}`);
  });

  test("an agent (Alice's)", async () => {
    const spawned = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    agentId = spawned.body.id as string;
    await until(async () => ((await t.request('GET', `/agents/${agentId}`, undefined, as('alice'))).body.status === 'starting' ? undefined : true), 90_000);
    const name = `berth-${agentId}`;
    agentAddress = await addressOf(name);
    failures.agent = await verify('agent', checksFor('agent', await observe(name, '/workspace'), host), [stackOutOfReach(name)]);
    assert.deepEqual(failures.agent, [], `the agent's container differs from the policy:\n${failures.agent.join('\n')}`);
  });

  test('a pooled engine', async () => {
    await poolReady(t, 1, 'run', 120_000);
    const [name] = t.berth.pools.ownContainerNames();
    assert.ok(name);
    failures.pooled = await verify('pooled', checksFor('pooled', await observe(name, '/workspace'), host), [stackOutOfReach(name), agentOutOfReach(name)]);
    assert.deepEqual(failures.pooled, [], `the pooled engine differs from the policy:\n${failures.pooled.join('\n')}`);
  });

  test("a run (Bob's)", async () => {
    const pooled = new Set(t.berth.pools.ownContainerNames());
    const answer = t.request('POST', '/run', { prompt: 'run: /bin/sleep 15', container: { memory: '384m' } }, as('bob'));
    const name = await until(async () => {
      const names = (await podman('ps', '--filter', `label=berth.instance=${t.config.instanceName}`, '--format', '{{.Names}}')).split('\n').filter(Boolean);
      for (const candidate of names.filter((n) => !pooled.has(n) && n !== `berth-${agentId}`)) {
        if ((await podman('top', candidate, 'args').catch(() => '')).includes('sleep 15')) return candidate;
      }
      return undefined;
    }, 90_000);
    failures.run = await verify('run', checksFor('run', await observe(name, '/workspace'), host), [stackOutOfReach(name), agentOutOfReach(name)]);
    const done = await answer;
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.deepEqual(failures.run, [], `the run's container differs from the policy:\n${failures.run.join('\n')}`);
  });

  /** A stack's service is reachable from its own stack's agent container only. */
  function stackOutOfReach(container: string): Check {
    return ["network: Alice's stack service is out of reach", async () => {
      assert.ok(cacheAddress, 'the stack test found no service address');
      assert.equal(await reaches(container, cacheAddress, 6379), false, `${container} reaches the stack's Redis at ${cacheAddress}:6379`);
    }];
  }

  /** Engine containers of different callers (or of none, a pooled engine) cannot reach each other. */
  function agentOutOfReach(container: string): Check {
    return ["network: Alice's agent container is out of reach", async () => {
      assert.ok(agentAddress, 'the agent test found no agent address');
      assert.equal(await reaches(container, agentAddress, 9), false, `${container} reaches Alice's agent at ${agentAddress} (port 9 answered)`);
    }];
  }
});

/** The container's address on its first network. */
async function addressOf(container: string): Promise<string | undefined> {
  const [info] = JSON.parse(await podman('inspect', container)) as { NetworkSettings: { Networks?: Record<string, { IPAddress?: string }> } }[];
  return Object.values(info!.NetworkSettings.Networks ?? {}).map((network) => network.IPAddress).find(Boolean);
}

async function until<T>(probe: () => Promise<T | undefined>, withinMs: number): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
