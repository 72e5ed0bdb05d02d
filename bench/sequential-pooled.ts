// The headline row of bench/berth-vs-raw.ts alone, by the same method: Berth with its pool at the default
// size, rounds of 5 sequential POST /run, each round begun as a user finds the service after a pause (the
// pool full, then 1.5 s). Prints the p50/p95 and, from Berth's own "run finished" log lines, where each
// run's time went (median per phase), so that a change to the claim path can be measured alone without
// the whole benchmark (which also measures raw podman, concurrency, agents, workspaces and a soak).
//   npx tsx bench/sequential-pooled.ts [--rounds N]
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseArgs, promisify } from 'node:util';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { startBerth } from '../src/server.js';
import { startOfflineModel } from '../src/offline-model/server.js';
import { percentile, runLoad } from '../test/support/load.js';
import { modelUrlFromHost } from '../test/support/berth.js';

process.env.CONTAINERS_CONF ??= join(import.meta.dirname, '..', 'scripts', 'containers.conf');
const exec = promisify(execFile);
const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '6' } } });
const rounds = Number(args.rounds);
const prompt = 'say: benchmark';
const PER_ROUND = 5;
const PAUSE_MS = 1_500;

const key = `sk-bench-${randomBytes(12).toString('hex')}`;
const secret = `berth-bench-key-${randomBytes(4).toString('hex')}`;
const dir = await mkdtemp(join(tmpdir(), 'berth-bench-seq-'));
const model = await startOfflineModel({ host: '0.0.0.0', port: 0, apiKey: key });
await exec('sh', ['-c', `printf '%s' "$KEY" | podman secret create ${secret} -`], { env: { ...process.env, KEY: key } });
const config = loadConfig({
  ...process.env,
  SERVICE_AUTH_ENABLED: 'false',
  SERVICE_RATE_LIMIT_ENABLED: 'false',
  SERVICE_ADDRESS: '127.0.0.1:0',
  SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
  SERVICE_DATA_DIR: join(dir, 'data'),
  SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
  SERVICE_INSTANCE_NAME: `bench-seq-${randomBytes(3).toString('hex')}`,
  SERVICE_OFFLINE_MODEL: 'false',
  SERVICE_GATEWAY_PORT: '0',
  SERVICE_ENGINE_CREDENTIALS_SECRET: secret,
  SERVICE_ENGINE_BASE_URL: modelUrlFromHost(model.port),
  SERVICE_LOG_LEVEL: 'info',
});
const finished: Record<string, number>[] = [];
const logLines = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.includes('"run finished"')) continue;
      const entry = JSON.parse(line) as { phases?: Record<string, number>; durationMs?: number };
      finished.push({ ...entry.phases });
    }
    done();
  },
});
const berth = await startBerth(config, pino({ level: 'info' }, logLines));

async function counter(name: string): Promise<number> {
  const text = await (await fetch(berth.metricsUrl)).text();
  const match = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}
async function poolReady(): Promise<void> {
  const deadline = Date.now() + 30_000;
  while ((await counter('berth_pool_ready{pool="run"}')) < config.pool.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, PAUSE_MS));
}

let cleaned: Promise<void> | undefined;
const cleanUp = () =>
  (cleaned ??= (async () => {
    await berth.stop();
    await model.close();
    await exec('podman', ['secret', 'rm', secret]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  })());
// Stopped early (Ctrl-C, a timeout): Berth removes its engines, disks and network as at the end.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`${signal}: stopping the bench's Berth…\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}

const latencies: number[] = [];
const byPosition: number[][] = Array.from({ length: PER_ROUND }, () => []);
let failures = 0;
try {
  await poolReady();
  await runLoad({ url: berth.url, total: 2, concurrency: 1, promptOf: () => prompt });
  finished.length = 0;
  for (let round = 0; round < rounds; round++) {
    await poolReady();
    const results = await runLoad({ url: berth.url, total: PER_ROUND, concurrency: 1, promptOf: () => prompt });
    for (const r of results) {
      if (r.ok) {
        latencies.push(r.ms);
        byPosition[r.index]!.push(r.ms);
      } else {
        failures++;
        process.stderr.write(`failure: ${r.error}\n`);
      }
    }
    process.stderr.write(`round ${round + 1}/${rounds}: ${results.map((r) => Math.round(r.ms)).join(' ')} ms\n`);
  }
  await berth.settled();
} finally {
  await cleanUp();
}
const median = (values: number[]) => Math.round(percentile(values, 50) * 10) / 10;
console.log(`sequential pooled POST /run, ${latencies.length} runs (${rounds} rounds of ${PER_ROUND}), ${failures} failures: p50 ${Math.round(percentile(latencies, 50))} ms, p95 ${Math.round(percentile(latencies, 95))} ms`);
console.log(`p50 by position in the round: ${byPosition.map((v) => `${median(v)}`).join(' / ')} ms`);
const phases = new Set(finished.flatMap((p) => Object.keys(p)));
console.log(`phases (median ms over ${finished.length} runs): ${[...phases].map((phase) => `${phase} ${median(finished.map((p) => p[phase] ?? 0))}`).join(', ')}`);
if (failures > 0) process.exitCode = 1;
