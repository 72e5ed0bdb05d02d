// `make cluster`'s script (scripts/cluster.sh) as a child process, for the cluster test and the cluster bench:
// its own directory and free ports (BERTH_CLUSTER_*), so it runs beside a user's `make cluster` and other
// tests. The script is the thing under test: it starts the throw-away PostgreSQL, the three nodes and HAProxy,
// and its SIGINT must stop them all. This harness only reads what the script records (its run/*.pid files),
// kills a node the way a lost host goes (kill -9 of the node and of its containers), and lists what is left,
// through the system's own tools (ps, podman, nft, findmnt, losetup), never by asking Berth.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort } from './postgres.js';
import { removeTestDir } from './test-dir.js';
import { removeAgentNetworkOf } from './berth.js';

const exec = promisify(execFile);
const CHECKOUT = join(import.meta.dirname, '../..');
export const NODE_COUNT = 3;

export interface ClusterNode {
  /** node-1, node-2, node-3: its SERVICE_NODE_NAME. */
  readonly name: string;
  readonly url: string;
  readonly metricsUrl: string;
  /** Its SERVICE_INSTANCE_NAME: the label of its containers, networks and nftables tables. */
  readonly instance: string;
  readonly dir: string;
}

export interface TestCluster {
  readonly dir: string;
  /** HAProxy's address: what clients use. */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** What the script printed so far. */
  output(): string;
  /** The cluster's SERVICE_DATABASE_URL, as the script recorded it (run/database.env). */
  databaseUrl(): string;
  /** The script's recorded process ids (nodes, HAProxy, PostgreSQL, the nodes' Podman services). */
  pids(): Map<string, number>;
  /**
   * Loses node `index` as a host goes: SIGKILL to the node's process group and to its Podman service, then
   * SIGKILL to every container of its instance (left as they are, exited, as after a power loss).
   */
  killNode(index: number): Promise<void>;
  /** Sends `signal` to the script and waits for it to exit (at most `withinMs`): its exit code or signal. */
  stop(signal?: NodeJS.Signals, withinMs?: number): Promise<number | string>;
  /** Everything of the cluster that still exists: processes, containers, networks, nftables tables, mounts, loop devices, PostgreSQL. */
  leftovers(): Promise<string[]>;
  /** Whatever happens: kills what is left and removes the directory (for after()). */
  dispose(): Promise<void>;
}

export interface ClusterOptions {
  /** SERVICE_* (and BERTH_CLUSTER_*) variables for the script, applied to every node. */
  readonly env?: Record<string, string>;
  readonly startTimeoutMs?: number;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const lines = (text: string) => text.split('\n').map((line) => line.trim()).filter(Boolean);

export async function startCluster(options: ClusterOptions = {}): Promise<TestCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-cluster-'));
  const name = `tc-${randomBytes(3).toString('hex')}`;
  const ports = async (count: number) => {
    const chosen: number[] = [];
    while (chosen.length < count) {
      const port = await freePort();
      if (!chosen.includes(port)) chosen.push(port);
    }
    return chosen;
  };
  const [lbPort, ...nodePorts] = await ports(1 + NODE_COUNT);
  const metricsPorts = await ports(NODE_COUNT);
  const gatewayPorts = await ports(NODE_COUNT);
  const nodes: ClusterNode[] = nodePorts.map((port, i) => ({
    name: `node-${i + 1}`,
    url: `http://127.0.0.1:${port}`,
    metricsUrl: `http://127.0.0.1:${metricsPorts[i]}/metrics`,
    instance: `${name}-node-${i + 1}`,
    dir: join(dir, `node-${i + 1}`),
  }));
  let output = '';
  // BERTH_TEST_CLUSTER_SCRIPT: another copy of the script in scripts/ (a mutation check runs a changed one).
  const child: ChildProcess = spawn('bash', [process.env.BERTH_TEST_CLUSTER_SCRIPT ?? 'scripts/cluster.sh'], {
    cwd: CHECKOUT,
    // Its own process group: a test runner that dies takes it down (below) without signalling the runner.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      // The engine credentials of the host (if any) are not this test's: every node uses its offline model.
      SERVICE_ENGINE_CREDENTIALS_SECRET: `berth-test-none-${name}`,
      SERVICE_LOG_LEVEL: 'info',
      ...options.env,
      BERTH_CLUSTER_DIR: dir,
      BERTH_CLUSTER_NAME: name,
      BERTH_CLUSTER_ADDRESS: `127.0.0.1:${lbPort}`,
      BERTH_CLUSTER_NODE_PORTS: nodePorts.join(' '),
      BERTH_CLUSTER_METRICS_PORTS: metricsPorts.join(' '),
      BERTH_CLUSTER_GATEWAY_PORTS: gatewayPorts.join(' '),
    },
  });
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const orphaned = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Gone.
    }
  };
  process.once('exit', orphaned);

  // Every pid the script recorded, read while its directory exists (the stop removes run/), kept for leftovers().
  const seen = new Map<string, number>();
  const readPids = () => {
    const runDir = join(dir, 'run');
    if (existsSync(runDir)) {
      for (const file of readdirSync(runDir).filter((f) => f.endsWith('.pid'))) {
        const pid = Number(readFileSync(join(runDir, file), 'utf8').trim());
        if (pid > 0) seen.set(file.replace(/\.pid$/, ''), pid);
      }
    }
    for (const node of nodes) {
      const file = join(node.dir, 'data', 'podman', 'podman.pid');
      if (existsSync(file)) seen.set(`${node.name} podman service`, Number(readFileSync(file, 'utf8').trim()));
    }
    return seen;
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 180_000);
  let code: number | string | undefined;
  void exited.then((c) => (code = c));
  while (!existsSync(join(dir, 'run', 'ready'))) {
    if (code !== undefined || Date.now() > deadline) {
      orphaned();
      await exited;
      await removeTestDir(dir);
      throw new Error(`make cluster's script did not get ready (${code !== undefined ? `exited ${code}` : 'timed out'}):\n${output}`);
    }
    await delay(200);
  }
  readPids();

  const instances = nodes.map((node) => node.instance);
  const cluster: TestCluster = {
    dir,
    url: `http://127.0.0.1:${lbPort}`,
    nodes,
    output: () => output,
    databaseUrl: () => /^SERVICE_DATABASE_URL=(.*)$/m.exec(readFileSync(join(dir, 'run', 'database.env'), 'utf8'))![1]!,
    pids: () => new Map(readPids()),
    async killNode(index) {
      const pids = readPids();
      const node = nodes[index]!;
      const pid = pids.get(node.name)!;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        process.kill(pid, 'SIGKILL');
      }
      const service = pids.get(`${node.name} podman service`);
      if (service !== undefined && alive(service)) process.kill(service, 'SIGKILL');
      const { stdout } = await exec('podman', ['ps', '-q', '--filter', `label=berth.instance=${node.instance}`]);
      if (lines(stdout).length > 0) await exec('podman', ['kill', '--signal', 'KILL', ...lines(stdout)]).catch(() => undefined);
      for (let i = 0; i < 50 && alive(pid); i += 1) await delay(100);
    },
    async stop(signal = 'SIGINT', withinMs = 120_000) {
      readPids();
      if (code === undefined) process.kill(child.pid!, signal);
      const result = await Promise.race([exited, delay(withinMs, 'still running' as const)]);
      if (result === 'still running') throw new Error(`make cluster's script did not exit within ${withinMs} ms after ${signal}:\n${output.slice(-4000)}`);
      return result;
    },
    async leftovers() {
      const left: string[] = [];
      for (const [what, pid] of seen) if (alive(pid)) left.push(`process ${pid} (${what})`);
      const { stdout: named } = await exec('pgrep', ['-f', dir]).catch(() => ({ stdout: '' }));
      for (const pid of lines(named)) left.push(`process ${pid} naming ${dir}`);
      const podman = async (args: string[]) => lines((await exec('podman', args)).stdout);
      for (const instance of instances) {
        for (const label of ['berth.instance', 'berth.image-tree', 'berth.stack-instance']) {
          for (const c of await podman(['ps', '-a', '--filter', `label=${label}=${instance}`, '--format', '{{.Names}}'])) left.push(`container ${c}`);
        }
        for (const n of await podman(['network', 'ls', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Name}}'])) left.push(`network ${n}`);
        for (const v of await podman(['volume', 'ls', '--filter', `label=berth.stack-instance=${instance}`, '--format', '{{.Name}}'])) left.push(`volume ${v}`);
        for (const family of ['inet', 'bridge']) {
          if (await exec('nft', ['list', 'table', family, `berth-${instance}`]).then(() => true, () => false)) left.push(`nft table ${family} berth-${instance}`);
        }
      }
      const { stdout: mounts } = await exec('findmnt', ['-rn', '-o', 'TARGET']);
      for (const target of lines(mounts)) if (target.startsWith(`${dir}/`)) left.push(`mount ${target}`);
      const { stdout: loops } = await exec('losetup', ['-l', '-n', '-O', 'NAME,BACK-FILE']).catch(() => ({ stdout: '' }));
      for (const line of lines(loops)) if (line.split(/\s+/)[1]?.startsWith(`${dir}/`)) left.push(`loop device ${line}`);
      if (existsSync(dir)) {
        for (const entry of readdirSync(dir)) if (entry !== 'logs') left.push(`${join(dir, entry)}`);
      }
      return left;
    },
    async dispose() {
      if (code === undefined) {
        // Still running (a failed test): the script's own stop first, then by force.
        await cluster.stop('SIGINT', 90_000).catch(() => orphaned());
      }
      for (const [, pid] of readPids()) if (alive(pid)) process.kill(pid, 'SIGKILL');
      // A stop that left something (the test then failed on it): removed here, so that no run of the test leaks.
      for (const instance of instances) {
        const ids: string[] = [];
        for (const label of ['berth.instance', 'berth.image-tree', 'berth.stack-instance']) {
          ids.push(...lines((await exec('podman', ['ps', '-aq', '--filter', `label=${label}=${instance}`])).stdout));
        }
        if (ids.length > 0) await exec('podman', ['rm', '--force', '--volumes', ...ids]).catch(() => undefined);
        await removeAgentNetworkOf(instance).catch(() => undefined);
      }
      process.off('exit', orphaned);
      // BERTH_TEST_KEEP_CLUSTER_LOGS=1 keeps the nodes', HAProxy's and PostgreSQL's logs to read after a failure.
      if (process.env.BERTH_TEST_KEEP_CLUSTER_LOGS === '1') {
        for (const entry of existsSync(dir) ? readdirSync(dir) : []) if (entry !== 'logs') await removeTestDir(join(dir, entry));
        process.stderr.write(`cluster logs kept in ${join(dir, 'logs')}\n`);
        return;
      }
      await removeTestDir(dir);
      await rm(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
