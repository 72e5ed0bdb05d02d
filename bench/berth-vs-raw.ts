// Berth against a raw `podman run` of the same image, engine image, network, credential secret, limits and
// engine command, talking to the same offline model, in one process: sequentially and at concurrency 1,
// 4 and 8, raw, Berth with the pool of pre-started engines off and Berth with it on (its default size),
// measured alternately round by round. Then /run/stream's first frame, persistent agents (spawn to idle,
// send to first output, memory with 20 idle), workspaces (bench/workspace-rows.ts), the model gateway's
// added time to the first streamed byte (bench/gateway-rows.ts) and a soak of POST /run at concurrency 8
// with the pool on; last, the cluster rows (bench/cluster.ts: make cluster's 3 nodes behind HAProxy vs one node).
// Prints the tables and writes the figures as JSON to bench/results/.
//   npx tsx bench/berth-vs-raw.ts [--rounds N] [--soak N] [--levels 1,4,8]
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { startBerth } from '../src/server.js';
import { startOfflineModel } from '../src/offline-model/server.js';
import { INSTANCE_LABEL } from '../src/runtime/container-runtime.js';
import { percentile, runLoad, type LoadResult } from '../test/support/load.js';
import { modelUrlFromHost } from '../test/support/berth.js';
import { measureWorkspaces, printWorkspaceRows, type WorkspaceRows } from './workspace-rows.js';
import { DEFAULT_SAMPLES as GATEWAY_SAMPLES, measureGateway, printGatewayRows, type GatewayRows } from './gateway-rows.js';
import { measureCluster, printClusterRows, type ClusterRows } from './cluster.js';

// The raw runs need the same Podman settings as Berth on this kind of host (runc, explicit ulimits).
process.env.CONTAINERS_CONF ??= join(import.meta.dirname, '..', 'scripts', 'containers.conf');
const exec = promisify(execFile);
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    soak: { type: 'string', default: '200' },
    levels: { type: 'string', default: '1,4,8' },
  },
});
const rounds = Number(args.rounds);
const soakRuns = Number(args.soak);
const levels = args.levels.split(',').map(Number);
const answer = 'benchmark';
const prompt = `say: ${answer}`;

const key = `sk-bench-${randomBytes(12).toString('hex')}`;
const secret = `berth-bench-key-${randomBytes(4).toString('hex')}`;
const dir = await mkdtemp(join(tmpdir(), 'berth-bench-'));
const model = await startOfflineModel({ host: '0.0.0.0', port: 0, apiKey: key });
await exec('sh', ['-c', `printf '%s' "$KEY" | podman secret create ${secret} -`], { env: { ...process.env, KEY: key } });
// Berth's gateway reaches the model from the host; a raw container, which has no gateway, reaches it on
// Podman's default network at that network's gateway address (Berth's agent network has no way out but
// Berth's gateway).
const modelUrl = modelUrlFromHost(model.port);
const rawNetwork = 'podman';
const rawGateway = (await exec('podman', ['network', 'inspect', rawNetwork, '--format', '{{range .Subnets}}{{.Gateway}} {{end}}'])).stdout.trim().split(' ')[0];
if (!rawGateway) throw new Error(`podman network "${rawNetwork}" has no gateway`);
const rawModelUrl = `http://${rawGateway}:${model.port}`;
const instance = `bench-${randomBytes(3).toString('hex')}`;
const berthConfig = (name: string, poolSize: number) =>
  loadConfig({
    ...process.env,
    SERVICE_AUTH_ENABLED: 'false',
    SERVICE_RATE_LIMIT_ENABLED: 'false',
    SERVICE_ADDRESS: '127.0.0.1:0',
    SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
    SERVICE_DATA_DIR: join(dir, name, 'data'),
    SERVICE_AGENT_SESSIONS_DIR: join(dir, name, 'sessions'),
    SERVICE_INSTANCE_NAME: `${instance}-${name}`,
    SERVICE_OFFLINE_MODEL: 'false',
    // Two Berths in this process: each its own gateway port (the default 8788 is taken by the first).
    SERVICE_GATEWAY_PORT: '0',
    SERVICE_ENGINE_CREDENTIALS_SECRET: secret,
    SERVICE_ENGINE_BASE_URL: modelUrl,
    SERVICE_MAX_CONCURRENT_RUNS: String(Math.max(...levels)),
    SERVICE_MAX_CONTAINERS_PER_CALLER: String(Math.max(32, IDLE_AGENTS + 4)),
    SERVICE_POOL_SIZE: String(poolSize),
    // Pool off means both pools off: no engine starts in the background of the Berth measured without one.
    ...(poolSize === 0 ? { SERVICE_AGENT_POOL_SIZE: '0' } : {}),
    SERVICE_LOG_LEVEL: 'error',
  });
// Two Berths in this process, measured alternately: the pool off, and the pool at its default size.
const IDLE_AGENTS = 20;
const config = berthConfig('off', 0);
const pooledConfig = berthConfig('on', loadConfig({ SERVICE_AUTH_ENABLED: 'false' }).pool.size);
const berth = await startBerth(config, pino({ level: 'error' }));
const pooled = await startBerth(pooledConfig, pino({ level: 'error' }));

// What a user would type: the engine image mounted by Podman, the same limits Berth applies by default.
const rawArgs = [
  'run', '--rm', '--network', rawNetwork,
  '--mount', `type=image,source=${config.agent.engineImage},destination=/opt/claude`,
  '--secret', `${secret},type=env,target=ANTHROPIC_API_KEY`,
  '-e', `ANTHROPIC_BASE_URL=${rawModelUrl}`,
  '-e', 'CLAUDE_CONFIG_DIR=/tmp/engine', '-e', 'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1', '-e', 'IS_SANDBOX=1',
  '-e', 'CLAUDE_CODE_MAX_RETRIES=0',
  '--memory', '512m', '--memory-swap', '512m', '--cpus', '1', '--pids-limit', String(config.agent.pidsLimit), '--cap-drop', 'ALL',
  '--security-opt', 'no-new-privileges',
  config.agent.image,
  '/opt/claude/claude', '-p', prompt, '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions',
];

async function rawBatch(total: number, concurrency: number): Promise<LoadResult[]> {
  const results: LoadResult[] = [];
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < total; index = next++) {
      const started = performance.now();
      try {
        const { stdout } = await exec('podman', rawArgs, { maxBuffer: 64 * 1024 * 1024 });
        if (!stdout.includes(`"result":"${answer}"`)) throw new Error(`unexpected answer: ${stdout.slice(-300)}`);
        results.push({ index, mode: 'sync', ok: true, output: answer, ms: performance.now() - started });
      } catch (error) {
        results.push({ index, mode: 'sync', ok: false, output: '', error: (error as Error).message.slice(0, 300), ms: performance.now() - started });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(total, concurrency) }, worker));
  return results;
}

const batchOn = (url: string) => (total: number, concurrency: number) => runLoad({ url, total, concurrency, promptOf: () => prompt });
const berthBatch = batchOn(berth.url);
const pooledBatch = batchOn(pooled.url);

interface Side {
  latencies: number[];
  failures: string[];
  wallMs: number;
}
const side = (): Side => ({ latencies: [], failures: [], wallMs: 0 });
interface Level {
  concurrency: number;
  runs: number;
  raw: Side;
  berth: Side;
  pooled: Side;
  hits: number;
}

async function timed(batch: () => Promise<LoadResult[]>, into: Side): Promise<void> {
  const started = performance.now();
  const results = await batch();
  into.wallMs += performance.now() - started;
  for (const r of results) {
    if (r.ok) into.latencies.push(r.ms);
    else into.failures.push(r.error ?? 'failed');
  }
}

const summary = (of: Side, runs: number) => ({
  p50_ms: Math.round(percentile(of.latencies, 50)),
  p95_ms: Math.round(percentile(of.latencies, 95)),
  throughput_per_s: Math.round((runs / (of.wallMs / 1000)) * 100) / 100,
  failures: of.failures.length,
});

/** A counter of a Berth's /metrics (0 when absent). */
async function counter(url: string, name: string): Promise<number> {
  const text = await (await fetch(url)).text();
  const match = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

/**
 * A pause before each timed batch, of every side alike: the service as a user finds it who comes back after
 * a moment (an engine that has just answered its handshake still finishes its start for about a second).
 */
const PAUSE_MS = 1_500;
const pause = () => new Promise((r) => setTimeout(r, PAUSE_MS));

async function poolReady(size: number, pool: 'run' | 'agent' = 'run'): Promise<void> {
  const deadline = Date.now() + 30_000;
  while ((await counter(pooled.metricsUrl, `berth_pool_ready{pool="${pool}"}`)) < size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await pause();
}

/** Milliseconds from GET /run/stream to its first `output` frame (the stream is read to its end). */
async function streamFirstFrame(url: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/run/stream?prompt=${encodeURIComponent(prompt)}`);
  const reader = response.body!.getReader();
  let first: number | undefined;
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
    if (first === undefined && text.includes('"type":"output"')) first = performance.now() - started;
  }
  if (first === undefined) throw new Error(`no output frame: ${text.slice(0, 300)}`);
  return first;
}

/** POST /agents until the agent is idle; then one send until its first output event. */
async function agentTimings(url: string): Promise<{ idleMs: number; firstOutputMs: number; id: string }> {
  const started = performance.now();
  const spawned = (await (await fetch(`${url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"disable_idle_timeout": true}' })).json()) as { id: string };
  let idleMs = 0;
  for (;;) {
    const agent = (await (await fetch(`${url}/agents/${spawned.id}`)).json()) as { status: string };
    if (agent.status === 'idle') {
      idleMs = performance.now() - started;
      break;
    }
    if (agent.status === 'exited') throw new Error('agent exited');
    await new Promise((r) => setTimeout(r, 5));
  }
  const stream = await fetch(`${url}/agents/${spawned.id}/stream`);
  const reader = stream.body!.getReader();
  const sent = performance.now();
  await fetch(`${url}/agents/${spawned.id}/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }) });
  let text = '';
  let firstOutputMs = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('agent stream ended before output');
    text += new TextDecoder().decode(value);
    if (text.includes('"type":"output"')) {
      firstOutputMs = performance.now() - sent;
      break;
    }
  }
  await reader.cancel();
  return { idleMs, firstOutputMs, id: spawned.id };
}

const results: Level[] = [];
interface Soak {
  runs: number;
  p50_ms: number;
  p95_ms: number;
  throughput_per_s: number;
  failures: number;
  p95_over_p50: number;
  containers_left: number;
}
let soak: Soak | undefined;
let workspaces: WorkspaceRows | undefined;
let gateway: GatewayRows | undefined;
interface OffOn {
  off: number;
  on: number;
}
const extras: { stream_first_frame_ms: OffOn; agent_idle_ms: OffOn; agent_first_output_ms: OffOn; rss_mb_idle_agents: { before: number; after: number; agents: number } } = {
  stream_first_frame_ms: { off: 0, on: 0 },
  agent_idle_ms: { off: 0, on: 0 },
  agent_first_output_ms: { off: 0, on: 0 },
  rss_mb_idle_agents: { before: 0, after: 0, agents: IDLE_AGENTS },
};
try {
  process.stderr.write('warming up…\n');
  await rawBatch(2, 1);
  await berthBatch(2, 1);
  await poolReady(pooledConfig.pool.size);
  await pooledBatch(2, 1);
  for (const concurrency of levels) {
    // Sequential runs get more rounds: their median is the headline ratio.
    const perRound = concurrency === 1 ? 5 : 2 * concurrency;
    const level: Level = { concurrency, runs: 0, raw: side(), berth: side(), pooled: side(), hits: 0 };
    for (let round = 0; round < rounds; round++) {
      await pause();
      await timed(() => rawBatch(perRound, concurrency), level.raw);
      await pause();
      await timed(() => berthBatch(perRound, concurrency), level.berth);
      // Each round starts as a user would find the service after a pause: the pool full.
      await poolReady(pooledConfig.pool.size);
      const hitsBefore = await counter(pooled.metricsUrl, 'berth_pool_hits_total{pool="run"}');
      await timed(() => pooledBatch(perRound, concurrency), level.pooled);
      level.hits += (await counter(pooled.metricsUrl, 'berth_pool_hits_total{pool="run"}')) - hitsBefore;
      level.runs += perRound;
      for (const failure of [...level.raw.failures, ...level.berth.failures, ...level.pooled.failures].slice(-3)) process.stderr.write(`  failure: ${failure}\n`);
      process.stderr.write(`  concurrency ${concurrency}, round ${round + 1}/${rounds}: ${level.runs} runs each\n`);
    }
    results.push(level);
  }

  process.stderr.write('streams, agents, memory…\n');
  const firstFrames = { off: [] as number[], on: [] as number[] };
  for (let i = 0; i < 5; i++) {
    firstFrames.off.push(await streamFirstFrame(berth.url));
    await poolReady(pooledConfig.pool.size);
    firstFrames.on.push(await streamFirstFrame(pooled.url));
  }
  extras.stream_first_frame_ms = { off: Math.round(percentile(firstFrames.off, 50)), on: Math.round(percentile(firstFrames.on, 50)) };
  // Agents: spawn to idle and send to first output, without and with the agents' pool (full before each
  // spawn, as after a pause), alternately.
  const idle = { off: [] as number[], on: [] as number[] };
  const first = { off: [] as number[], on: [] as number[] };
  const agentRounds = 7;
  for (let i = 0; i < agentRounds; i++) {
    const off = await agentTimings(berth.url);
    await poolReady(pooledConfig.pool.agentSize, 'agent');
    const on = await agentTimings(pooled.url);
    idle.off.push(off.idleMs);
    idle.on.push(on.idleMs);
    first.off.push(off.firstOutputMs);
    first.on.push(on.firstOutputMs);
    await fetch(`${berth.url}/agents/${off.id}`, { method: 'DELETE' });
    await fetch(`${pooled.url}/agents/${on.id}`, { method: 'DELETE' });
  }
  extras.agent_idle_ms = { off: Math.round(percentile(idle.off, 50)), on: Math.round(percentile(idle.on, 50)) };
  extras.agent_first_output_ms = { off: Math.round(percentile(first.off, 50)), on: Math.round(percentile(first.on, 50)) };
  // Memory: the service with 20 idle agents.
  const agents: string[] = [];
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < IDLE_AGENTS; i++) agents.push((await agentTimings(berth.url)).id);
  await new Promise((r) => setTimeout(r, 2_000));
  extras.rss_mb_idle_agents = { before: Math.round(rssBefore / 2 ** 20), after: Math.round(process.memoryUsage().rss / 2 ** 20), agents: IDLE_AGENTS };
  for (const id of agents) await fetch(`${berth.url}/agents/${id}`, { method: 'DELETE' });

  process.stderr.write('workspaces…\n');
  workspaces = await measureWorkspaces(
    { url: pooled.url, metricsUrl: pooled.metricsUrl, poolReady: () => poolReady(pooledConfig.pool.size), counter },
    dir,
    (line) => process.stderr.write(`${line}\n`),
  );

  process.stderr.write('model gateway…\n');
  gateway = await measureGateway(GATEWAY_SAMPLES, (line) => process.stderr.write(`${line}\n`));

  if (soakRuns > 0) {
    process.stderr.write(`soak: ${soakRuns} POST /run at concurrency 8 (pool on)…\n`);
    const soakSide = side();
    await timed(() => pooledBatch(soakRuns, 8), soakSide);
    // Runs are answered at their result; their containers are removed right after.
    await pooled.settled();
    const pooledNow = new Set(pooled.pools.ownContainerNames());
    const left = (await pooled.runtime.listContainers(`${INSTANCE_LABEL}=${pooledConfig.instanceName}`)).filter((c) => !pooledNow.has(c.names[0] ?? '')).length;
    const s = summary(soakSide, soakRuns);
    soak = { runs: soakRuns, ...s, p95_over_p50: Math.round((s.p95_ms / s.p50_ms) * 100) / 100, containers_left: left };
    for (const failure of soakSide.failures.slice(0, 5)) process.stderr.write(`  failure: ${failure}\n`);
  }
} finally {
  await berth.stop();
  await pooled.stop();
  await model.close();
  await exec('podman', ['secret', 'rm', secret]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

// The cluster rows (issue 26; bench/cluster.ts), once the two Berths above have stopped: make cluster's three
// nodes behind HAProxy against one node, on this host alone.
process.stderr.write('cluster (make cluster: 3 nodes behind HAProxy) vs one node…\n');
const cluster: ClusterRows | { error: string } = await measureCluster((line) => process.stderr.write(`${line}\n`)).catch((error: Error) => ({ error: error.message }));

const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
const rows = results.map((level) => {
  const raw = summary(level.raw, level.runs);
  const off = summary(level.berth, level.runs);
  const on = summary(level.pooled, level.runs);
  return {
    concurrency: level.concurrency,
    runs: level.runs,
    raw,
    berth: off,
    pooled: on,
    pool_hit_rate: ratio(level.hits, level.runs),
    p50_ratio_off: ratio(off.p50_ms, raw.p50_ms),
    p50_ratio_on: ratio(on.p50_ms, raw.p50_ms),
    speedup_on: ratio(raw.p50_ms, on.p50_ms),
    throughput_on_vs_off: ratio(on.throughput_per_s, off.throughput_per_s),
  };
});
const header = '| concurrency | runs each | raw p50 / p95 | raw runs/s | Berth p50 / p95 (pool off) | runs/s | Berth p50 / p95 (pool on) | runs/s | pool hits | p50 vs raw (off / on) | raw ÷ pooled p50 | throughput on ÷ off | failures raw / off / on |';
console.log(header);
console.log(header.replace(/[^|]/g, '-'));
for (const r of rows) {
  console.log(
    `| ${r.concurrency} | ${r.runs} | ${r.raw.p50_ms} / ${r.raw.p95_ms} ms | ${r.raw.throughput_per_s} | ${r.berth.p50_ms} / ${r.berth.p95_ms} ms | ${r.berth.throughput_per_s} | ${r.pooled.p50_ms} / ${r.pooled.p95_ms} ms | ${r.pooled.throughput_per_s} | ${Math.round(r.pool_hit_rate * 100)} % | ${r.p50_ratio_off} / ${r.p50_ratio_on} | ${r.speedup_on}× | ${r.throughput_on_vs_off} | ${r.raw.failures} / ${r.berth.failures} / ${r.pooled.failures} |`,
  );
}
console.log(`\n| measure | value |\n|---|---|`);
console.log(`| /run/stream to its first output frame, p50 (pool off / on) | ${extras.stream_first_frame_ms.off} / ${extras.stream_first_frame_ms.on} ms |`);
console.log(`| POST /agents to idle, p50 (pool off / on) | ${extras.agent_idle_ms.off} / ${extras.agent_idle_ms.on} ms |`);
console.log(`| agent send to first output, p50 (pool off / on) | ${extras.agent_first_output_ms.off} / ${extras.agent_first_output_ms.on} ms |`);
console.log(`| bench process RSS (both Berths in it) before / with ${IDLE_AGENTS} idle agents | ${extras.rss_mb_idle_agents.before} / ${extras.rss_mb_idle_agents.after} MiB |`);
if (workspaces) printWorkspaceRows(workspaces);
if (gateway) printGatewayRows(gateway);
if ('error' in cluster) console.log(`\ncluster rows: not measured: ${cluster.error}`);
else printClusterRows(cluster);
if (soak) {
  console.log(
    `\nsoak: ${soak.runs} POST /run at concurrency 8 (pool on): ${soak.failures} failures, p50 ${soak.p50_ms} ms, p95 ${soak.p95_ms} ms (p95/p50 ${soak.p95_over_p50}), ${soak.throughput_per_s} runs/s, ${soak.containers_left} containers left`,
  );
}
const resultsDir = join(import.meta.dirname, 'results');
await mkdir(resultsDir, { recursive: true });
const file = join(resultsDir, `berth-vs-raw-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), levels: rows, extras, workspaces, gateway, soak, cluster }, null, 2)}\n`);
console.log(`\nfigures written to ${file}`);
const failed = rows.some((r) => r.berth.failures > 0 || r.pooled.failures > 0) || (soak !== undefined && (soak.failures > 0 || soak.containers_left > 0)) || 'error' in cluster;
if (failed) process.exitCode = 1;
