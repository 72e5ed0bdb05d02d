// The cluster rows of the benchmark (issue 26), measured on `make cluster`'s own script (test/support/cluster.ts
// starts scripts/cluster.sh: a throw-away PostgreSQL, three nodes, HAProxy) against one node as `make up` runs it
// (a child process, embedded SQLite), both with the same pool size and the embedded offline model:
// - sequential pooled POST /run p50 through HAProxy to the cluster ÷ the single node's (target <= 1.2), rounds
//   alternating between the two, each begun with every pool full (as a user finds the service after a pause);
// - job dispatch latency, submit -> claim, p50 (target <= 50 ms; bench/dispatch-latency.ts, Helper A's): jobs
//   sent to node-1 while its job slots are all held by sleeping jobs, so each waits in the shared queue until
//   another node, woken by NOTIFY, claims it (a job its own node claims at submission waits 0 ms by construction);
// - throughput at concurrency 8, cluster vs single node, with the CPU seconds each run cost: of the whole host
//   (/proc/stat: the engines' containers included; the machine's other load, measured just before, taken off) and of the service's
//   processes (nodes, their Podman services, PostgreSQL, HAProxy). All nodes share this host's CPUs, so the
//   cluster's throughput here is measured as is; what three hosts would give is estimated from the CPU seconds.
//   npx tsx bench/cluster.ts [--rounds N] [--throughput-runs N]
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { measureDispatchLatency } from './dispatch-latency.js';
import { percentile, runLoad } from '../test/support/load.js';
import { startCluster, type TestCluster } from '../test/support/cluster.js';
import { freePort } from '../test/support/postgres.js';
import { removeAgentNetworkOf } from '../test/support/berth.js';

const exec = promisify(execFile);
const CHECKOUT = join(import.meta.dirname, '..');
// Berth's default pool: a round of 5 sequential runs finds warm engines on either side, as in the headline row.
const POOL_SIZE = 4;
const CONCURRENCY = 8;
const PER_ROUND = 5;
const PAUSE_MS = 1_500;

export interface ClusterRows {
  readonly sequential: { readonly runs_each: number; readonly single_p50_ms: number; readonly cluster_p50_ms: number; readonly ratio: number; readonly target: 1.2; readonly failures: number };
  readonly dispatch: { readonly jobs: number; readonly queued: number; readonly queued_p50_ms: number | null; readonly queued_p95_ms: number | null; readonly target_p50_ms: 50 } | { readonly error: string };
  readonly throughput: {
    readonly concurrency: number;
    readonly runs_each: number;
    readonly single_runs_per_s: number;
    readonly cluster_runs_per_s: number;
    readonly single_host_cpu_s_per_run: number;
    readonly cluster_host_cpu_s_per_run: number;
    readonly single_service_cpu_s_per_run: number;
    readonly cluster_service_cpu_s_per_run: number;
    /** 3 × the single node's runs/s × (its host CPU per run ÷ the cluster's): three hosts like this one. */
    readonly estimated_three_hosts_runs_per_s: number;
    /** Busy CPUs of the machine's other work, measured before each side's runs (taken off the host's CPU). */
    readonly background_cpus: { readonly single: number; readonly cluster: number };
    readonly failures: number;
  };
}

/** Environment both sides share: no auth, no rate limit, the same pool and slots. */
const COMMON = {
  SERVICE_AUTH_ENABLED: 'false',
  SERVICE_RATE_LIMIT_ENABLED: 'false',
  SERVICE_POOL_SIZE: String(POOL_SIZE),
  SERVICE_AGENT_POOL_SIZE: '0',
  // Slots are not what is compared: as many as the concurrency on every node.
  SERVICE_MAX_CONCURRENT_RUNS: String(CONCURRENCY),
  SERVICE_MAX_CONTAINERS_PER_CALLER: '64',
  SERVICE_LOG_LEVEL: 'warn',
};

interface SingleNode {
  readonly url: string;
  readonly metricsUrl: string;
  pids(): number[];
  stop(): Promise<void>;
}

/** One node as `make up` runs it (embedded SQLite), a child process with its own instance and directory. */
async function startSingleNode(): Promise<SingleNode> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-single-'));
  const instance = `bench-single-${randomBytes(3).toString('hex')}`;
  const [port, metrics] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: CHECKOUT,
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      ...COMMON,
      SERVICE_ADDRESS: `127.0.0.1:${port}`,
      SERVICE_METRICS_ADDRESS: `127.0.0.1:${metrics}`,
      SERVICE_GATEWAY_PORT: '0',
      SERVICE_OFFLINE_MODEL_PORT: '0',
      SERVICE_INSTANCE_NAME: instance,
      SERVICE_DATA_DIR: join(dir, 'data'),
      SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
      SERVICE_ENGINE_CREDENTIALS_SECRET: `berth-bench-none-${instance}`,
    },
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  for (let waited = 0; !(await fetch(`${url}/health`).then((r) => r.ok, () => false)); waited += 200) {
    if (child.exitCode !== null || waited > 120_000) throw new Error(`the single node did not start (exit ${child.exitCode})`);
    await delay(200);
  }
  const podmanPid = () => {
    const file = join(dir, 'data', 'podman', 'podman.pid');
    return existsSync(file) ? [Number(readFileSync(file, 'utf8'))] : [];
  };
  return {
    url,
    metricsUrl: `http://127.0.0.1:${metrics}/metrics`,
    pids: () => [child.pid!, ...podmanPid()],
    async stop() {
      if (child.exitCode === null) process.kill(child.pid!, 'SIGINT');
      await Promise.race([exited, delay(60_000)]);
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
      const { stdout } = await exec('podman', ['ps', '-aq', '--filter', `label=berth.instance=${instance}`]);
      if (stdout.trim()) await exec('podman', ['rm', '-f', ...stdout.trim().split('\n')]).catch(() => undefined);
      await removeAgentNetworkOf(instance);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function counter(metricsUrl: string, name: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** Waits until every pool behind these metrics holds its engines ready (or 60 s passed: then it goes on). */
async function poolsReady(metricsUrls: readonly string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (const url of metricsUrls) {
    while ((await counter(url, 'berth_pool_ready{pool="run"}')) < POOL_SIZE && Date.now() < deadline) await delay(100);
  }
}

/** CPU seconds used so far by these processes and their live descendants (with the children they reaped). */
async function processCpuSeconds(pids: readonly number[]): Promise<number> {
  const ticks = 100;
  let total = 0;
  const seen = new Set<number>();
  const visit = async (pid: number) => {
    if (seen.has(pid)) return;
    seen.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, cutime, cstime: fields 14-17 of the line, 12-15 after the command.
      total += [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) / ticks;
    } catch {
      return;
    }
    const { stdout } = await exec('pgrep', ['-P', String(pid)]).catch(() => ({ stdout: '' }));
    for (const child of stdout.split('\n').filter(Boolean)) await visit(Number(child));
  };
  for (const pid of pids) await visit(pid);
  return total;
}

/** Busy CPU seconds of the whole host so far (/proc/stat: everything but idle and iowait). */
function hostCpuSeconds(): number {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = values.map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / 100;
}

/** The host's busy CPU seconds per second over `ms`, with nothing of the bench running: the machine's other load. */
async function backgroundCpuRate(ms = 3_000): Promise<number> {
  const before = hostCpuSeconds();
  await delay(ms);
  return (hostCpuSeconds() - before) / (ms / 1000);
}

async function throughput(url: string, pids: () => readonly number[], runs: number) {
  // The host's CPU per run counts what the machine did meanwhile: its background rate, measured just before, is
  // taken off (an estimate: other work on the machine may change while the runs go).
  const background = await backgroundCpuRate();
  const [hostBefore, serviceBefore, started] = [hostCpuSeconds(), await processCpuSeconds(pids()), performance.now()];
  const results = await runLoad({ url, total: runs, concurrency: CONCURRENCY, promptOf: (i) => `say: throughput ${i}` });
  const seconds = (performance.now() - started) / 1000;
  const [hostAfter, serviceAfter] = [hostCpuSeconds(), await processCpuSeconds(pids())];
  return {
    runsPerS: Math.round((runs / seconds) * 100) / 100,
    hostCpu: Math.round((Math.max(hostAfter - hostBefore - background * seconds, serviceAfter - serviceBefore) / runs) * 1000) / 1000,
    backgroundCpu: Math.round(background * 100) / 100,
    serviceCpu: Math.round(((serviceAfter - serviceBefore) / runs) * 1000) / 1000,
    failures: results.filter((r) => !r.ok).length,
  };
}

/**
 * Takes every job slot of the node at `baseUrl` with async jobs that sleep (a node claims a job itself at
 * submission while it has a free slot): answers their ids once all of them run.
 */
async function holdJobSlots(baseUrl: string, count: number, seconds: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const response = await fetch(`${baseUrl}/run/async`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: `run: /bin/sleep ${seconds}\nsay: held` }) });
    const body = (await response.json()) as { job_id?: string };
    if (!response.ok || body.job_id === undefined) throw new Error(`POST /run/async answered ${response.status}: ${JSON.stringify(body)}`);
    ids.push(body.job_id);
  }
  const deadline = Date.now() + 120_000;
  while (!(await jobsAre(baseUrl, ids, (status) => status === 'running'))) {
    if (Date.now() > deadline) throw new Error('the jobs holding the slots did not all start within 2 minutes');
    await delay(250);
  }
  return ids;
}

async function jobsAre(baseUrl: string, ids: readonly string[], ok: (status: string) => boolean): Promise<boolean> {
  for (const id of ids) {
    const body = (await (await fetch(`${baseUrl}/jobs/${id}`)).json()) as { status?: string };
    if (!ok(body.status ?? '')) return false;
  }
  return true;
}

export async function measureCluster(log: (line: string) => void, options: { rounds?: number; throughputRuns?: number } = {}): Promise<ClusterRows> {
  const rounds = options.rounds ?? 4;
  const throughputRuns = options.throughputRuns ?? 24;
  log('  starting the single node and make cluster (3 nodes, PostgreSQL, HAProxy)…');
  const single = await startSingleNode();
  let cluster: TestCluster | undefined;
  try {
    cluster = await startCluster({ env: COMMON });
    const c = cluster;
    const clusterMetrics = c.nodes.map((n) => n.metricsUrl);
    const clusterPids = () => [...c.pids().values()];

    // Warm both (first runs compile and fill caches), then alternate rounds.
    await runLoad({ url: single.url, total: 2, concurrency: 1 });
    await runLoad({ url: c.url, total: 3, concurrency: 1 });
    const samples = { single: [] as number[], cluster: [] as number[] };
    let failures = 0;
    for (let round = 0; round < rounds; round += 1) {
      for (const [side, url, metrics] of [['single', single.url, [single.metricsUrl]], ['cluster', c.url, clusterMetrics]] as const) {
        await poolsReady(metrics);
        await delay(PAUSE_MS);
        const results = await runLoad({ url, total: PER_ROUND, concurrency: 1, promptOf: (i) => `say: sequential ${i}` });
        failures += results.filter((r) => !r.ok).length;
        samples[side].push(...results.filter((r) => r.ok).map((r) => r.ms));
      }
      log(`  sequential, round ${round + 1}/${rounds}`);
    }
    const singleP50 = Math.round(percentile(samples.single, 50));
    const clusterP50 = Math.round(percentile(samples.cluster, 50));

    log('  dispatch latency (node-1 busy, jobs claimed from the queue by the others)…');
    let dispatch: ClusterRows['dispatch'];
    try {
      const databaseUrl = c.databaseUrl();
      const held = await holdJobSlots(c.nodes[0]!.url, CONCURRENCY, 20);
      const measured = await measureDispatchLatency({ baseUrl: c.nodes[0]!.url, databaseUrl, jobs: 16, intervalMs: 250 });
      dispatch = { jobs: measured.samples.length, queued: measured.queued, queued_p50_ms: round1(measured.queued_p50_ms), queued_p95_ms: round1(measured.queued_p95_ms), target_p50_ms: 50 };
      // The throughput below starts with every slot free again.
      const deadline = Date.now() + 120_000;
      while (!(await jobsAre(c.nodes[0]!.url, held, (status) => !['pending', 'running'].includes(status))) && Date.now() < deadline) await delay(500);
    } catch (error) {
      dispatch = { error: (error as Error).message };
    }

    log(`  throughput at concurrency ${CONCURRENCY}, ${throughputRuns} runs each…`);
    await poolsReady([single.metricsUrl]);
    const one = await throughput(single.url, () => single.pids(), throughputRuns);
    await poolsReady(clusterMetrics);
    const three = await throughput(c.url, clusterPids, throughputRuns);
    return {
      sequential: { runs_each: samples.single.length, single_p50_ms: singleP50, cluster_p50_ms: clusterP50, ratio: Math.round((clusterP50 / singleP50) * 100) / 100, target: 1.2, failures },
      dispatch,
      throughput: {
        concurrency: CONCURRENCY,
        runs_each: throughputRuns,
        single_runs_per_s: one.runsPerS,
        cluster_runs_per_s: three.runsPerS,
        single_host_cpu_s_per_run: one.hostCpu,
        cluster_host_cpu_s_per_run: three.hostCpu,
        single_service_cpu_s_per_run: one.serviceCpu,
        cluster_service_cpu_s_per_run: three.serviceCpu,
        // Each host of three would run its own engines as the one node here does; what the cluster adds per run is
        // its coordination (PostgreSQL, HAProxy, forwarding, the nodes' own work), read from the service's
        // processes alone: the whole host's figure mixes in whatever else the machine did (background taken off
        // only as an estimate), and once made an idle cluster's settling look like a saving.
        estimated_three_hosts_runs_per_s: Math.round(3 * one.runsPerS * Math.min(1, one.serviceCpu / three.serviceCpu) * 100) / 100,
        background_cpus: { single: one.backgroundCpu, cluster: three.backgroundCpu },
        failures: one.failures + three.failures,
      },
    };
  } finally {
    await cluster?.dispose();
    await single.stop();
  }
}

function round1(value: number | null): number | null {
  return value === null ? null : Math.round(value * 10) / 10;
}

export function printClusterRows(rows: ClusterRows): void {
  const s = rows.sequential;
  const t = rows.throughput;
  console.log('\n| cluster (3 nodes behind HAProxy, one host) | value |\n|---|---|');
  console.log(`| sequential pooled POST /run p50: through HAProxy to 3 nodes ÷ one node | ${s.cluster_p50_ms} / ${s.single_p50_ms} ms = ${s.ratio} (target ≤ ${s.target}; ${s.runs_each} runs each, ${s.failures} failures) |`);
  if ('error' in rows.dispatch) console.log(`| job dispatch, submit → claim p50 | not measured: ${rows.dispatch.error} |`);
  else console.log(`| job dispatch, submit → claim p50 / p95 (queued path) | ${rows.dispatch.queued_p50_ms} / ${rows.dispatch.queued_p95_ms} ms (target p50 ≤ ${rows.dispatch.target_p50_ms}; ${rows.dispatch.queued} of ${rows.dispatch.jobs} jobs through the queue) |`);
  console.log(`| throughput at concurrency ${t.concurrency}: 3 nodes ÷ one node, same host | ${t.cluster_runs_per_s} / ${t.single_runs_per_s} runs/s (${t.runs_each} runs each, ${t.failures} failures) |`);
  console.log(`| CPU s per run, whole host (engines included; the machine's other load taken off: ${t.background_cpus.cluster} / ${t.background_cpus.single} CPUs busy before): 3 nodes / one node | ${t.cluster_host_cpu_s_per_run} / ${t.single_host_cpu_s_per_run} s |`);
  console.log(`| CPU s per run, the service's processes (nodes, Podman services, PostgreSQL, HAProxy): 3 nodes / one node | ${t.cluster_service_cpu_s_per_run} / ${t.single_service_cpu_s_per_run} s |`);
  if (t.cluster_host_cpu_s_per_run === t.cluster_service_cpu_s_per_run || t.single_host_cpu_s_per_run === t.single_service_cpu_s_per_run) {
    console.log('| (the host figure fell to the service\'s own: the machine\'s other load took about as much CPU as there was, so the host\'s CPU per run could not be told apart) | |');
  }
  console.log(`| estimated throughput of 3 nodes on 3 hosts like this one (3 × one node's runs/s × its service CPU per run ÷ the cluster's, at most 1) | ${t.estimated_three_hosts_runs_per_s} runs/s |`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.env.CONTAINERS_CONF ??= join(CHECKOUT, 'scripts', 'containers.conf');
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '4' }, 'throughput-runs': { type: 'string', default: '24' } } });
  const rows = await measureCluster((line) => process.stderr.write(`${line}\n`), { rounds: Number(values.rounds), throughputRuns: Number(values['throughput-runs']) });
  printClusterRows(rows);
  console.log(`\n${JSON.stringify(rows, null, 2)}`);
}
