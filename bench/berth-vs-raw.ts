// Berth against a raw `podman run` of the same image, engine image, network, credential secret, limits and
// engine command, talking to the same offline model, in one process: sequentially and at concurrency 1,
// 4 and 8, the two measured alternately round by round. Then a soak of POST /run at concurrency 8.
// Prints one table and writes the figures as JSON to bench/results/.
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
const instance = `bench-${randomBytes(3).toString('hex')}`;
const config = loadConfig({
  ...process.env,
  SERVICE_AUTH_ENABLED: 'false',
  SERVICE_RATE_LIMIT_ENABLED: 'false',
  SERVICE_ADDRESS: '127.0.0.1:0',
  SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
  SERVICE_DATA_DIR: join(dir, 'data'),
  SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
  SERVICE_INSTANCE_NAME: instance,
  SERVICE_OFFLINE_MODEL: 'false',
  SERVICE_ENGINE_CREDENTIALS_SECRET: secret,
  SERVICE_ENGINE_BASE_URL: `http://host.containers.internal:${model.port}`,
  SERVICE_MAX_CONCURRENT_RUNS: String(Math.max(...levels)),
  SERVICE_LOG_LEVEL: 'error',
});
const berth = await startBerth(config, pino({ level: 'error' }));

// What a user would type: the engine image mounted by Podman, the same limits Berth applies by default.
const rawArgs = [
  'run', '--rm', '--network', config.agent.network,
  '--mount', `type=image,source=${config.agent.engineImage},destination=/opt/claude`,
  '--secret', `${secret},type=env,target=ANTHROPIC_API_KEY`,
  '-e', `ANTHROPIC_BASE_URL=http://host.containers.internal:${model.port}`,
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

const berthBatch = (total: number, concurrency: number) => runLoad({ url: berth.url, total, concurrency, promptOf: () => prompt });

interface Side {
  latencies: number[];
  failures: string[];
  wallMs: number;
}
interface Level {
  concurrency: number;
  runs: number;
  raw: Side;
  berth: Side;
}

async function timed(batch: () => Promise<LoadResult[]>, side: Side): Promise<void> {
  const started = performance.now();
  const results = await batch();
  side.wallMs += performance.now() - started;
  for (const r of results) {
    if (r.ok) side.latencies.push(r.ms);
    else side.failures.push(r.error ?? 'failed');
  }
}

const summary = (side: Side, runs: number) => ({
  p50_ms: Math.round(percentile(side.latencies, 50)),
  p95_ms: Math.round(percentile(side.latencies, 95)),
  throughput_per_s: Math.round((runs / (side.wallMs / 1000)) * 100) / 100,
  failures: side.failures.length,
});

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
try {
  process.stderr.write('warming up…\n');
  await rawBatch(2, 1);
  await berthBatch(2, 1);
  for (const concurrency of levels) {
    // Sequential runs get more rounds: their median is the headline ratio.
    const perRound = concurrency === 1 ? 5 : 2 * concurrency;
    const level: Level = { concurrency, runs: 0, raw: { latencies: [], failures: [], wallMs: 0 }, berth: { latencies: [], failures: [], wallMs: 0 } };
    for (let round = 0; round < rounds; round++) {
      await timed(() => rawBatch(perRound, concurrency), level.raw);
      await timed(() => berthBatch(perRound, concurrency), level.berth);
      level.runs += perRound;
      process.stderr.write(`  concurrency ${concurrency}, round ${round + 1}/${rounds}: ${level.runs} runs each\n`);
    }
    results.push(level);
  }
  if (soakRuns > 0) {
    process.stderr.write(`soak: ${soakRuns} POST /run at concurrency 8…\n`);
    const side: Side = { latencies: [], failures: [], wallMs: 0 };
    await timed(() => berthBatch(soakRuns, 8), side);
    const left = (await berth.runtime.listContainers(`${INSTANCE_LABEL}=${instance}`)).length;
    const s = summary(side, soakRuns);
    soak = { runs: soakRuns, ...s, p95_over_p50: Math.round((s.p95_ms / s.p50_ms) * 100) / 100, containers_left: left };
    for (const failure of side.failures.slice(0, 5)) process.stderr.write(`  failure: ${failure}\n`);
  }
} finally {
  await berth.stop();
  await model.close();
  await exec('podman', ['secret', 'rm', secret]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

const rows = results.map((level) => {
  const raw = summary(level.raw, level.runs);
  const via = summary(level.berth, level.runs);
  return {
    concurrency: level.concurrency,
    runs: level.runs,
    raw,
    berth: via,
    p50_ratio: Math.round((via.p50_ms / raw.p50_ms) * 100) / 100,
    throughput_ratio: Math.round((via.throughput_per_s / raw.throughput_per_s) * 100) / 100,
  };
});
const header = '| concurrency | runs each | raw p50 | raw p95 | raw runs/s | Berth p50 | Berth p95 | Berth runs/s | p50 ratio | throughput ratio | failures raw / Berth |';
console.log(header);
console.log(header.replace(/[^|]/g, '-'));
for (const r of rows) {
  console.log(
    `| ${r.concurrency} | ${r.runs} | ${r.raw.p50_ms} ms | ${r.raw.p95_ms} ms | ${r.raw.throughput_per_s} | ${r.berth.p50_ms} ms | ${r.berth.p95_ms} ms | ${r.berth.throughput_per_s} | ${r.p50_ratio} | ${r.throughput_ratio} | ${r.raw.failures} / ${r.berth.failures} |`,
  );
}
if (soak) {
  console.log(
    `\nsoak: ${soak.runs} POST /run at concurrency 8: ${soak.failures} failures, p50 ${soak.p50_ms} ms, p95 ${soak.p95_ms} ms (p95/p50 ${soak.p95_over_p50}), ${soak.throughput_per_s} runs/s, ${soak.containers_left} containers left`,
  );
}
const resultsDir = join(import.meta.dirname, 'results');
await mkdir(resultsDir, { recursive: true });
const file = join(resultsDir, `berth-vs-raw-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), levels: rows, soak }, null, 2)}\n`);
console.log(`\nfigures written to ${file}`);
const failed = rows.some((r) => r.berth.failures > 0) || (soak !== undefined && (soak.failures > 0 || soak.containers_left > 0));
if (failed) process.exitCode = 1;
