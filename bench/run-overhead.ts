// Berth's overhead over a raw `podman run`: the median latency of POST /run with a `say:` prompt against
// `podman run --rm` of the same image, engine image mount, network, credential secret and engine command,
// talking to the same offline model, measured alternately in one process. Prints both and their ratio.
//   npx tsx bench/run-overhead.ts [runs]     (default 15 runs each, after 2 warm-up runs each)
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { startBerth } from '../src/server.js';
import { startOfflineModel } from '../src/offline-model/server.js';

const exec = promisify(execFile);
const runs = Number(process.argv[2] ?? 15);
const warmups = 2;
const prompt = 'say: benchmark';

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const key = `sk-bench-${randomBytes(12).toString('hex')}`;
const secret = `berth-bench-key-${randomBytes(4).toString('hex')}`;
const dir = await mkdtemp(join(tmpdir(), 'berth-bench-'));
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
  SERVICE_INSTANCE_NAME: `bench-${randomBytes(3).toString('hex')}`,
  SERVICE_OFFLINE_MODEL: 'false',
  SERVICE_ENGINE_CREDENTIALS_SECRET: secret,
  SERVICE_ENGINE_BASE_URL: `http://host.containers.internal:${model.port}`,
  SERVICE_LOG_LEVEL: 'error',
});
const berth = await startBerth(config, pino({ level: 'error' }));

const rawArgs = [
  'run', '--rm', '--network', config.agent.network,
  '--mount', `type=image,source=${config.agent.engineImage},destination=/opt/claude`,
  '--secret', `${secret},type=env,target=ANTHROPIC_API_KEY`,
  '-e', `ANTHROPIC_BASE_URL=http://host.containers.internal:${model.port}`,
  '-e', 'CLAUDE_CONFIG_DIR=/tmp/engine', '-e', 'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1', '-e', 'IS_SANDBOX=1',
  '--memory', '512m', '--cpus', '1', '--pids-limit', String(config.agent.pidsLimit), '--cap-drop', 'ALL',
  '--security-opt', 'no-new-privileges',
  config.agent.image,
  '/opt/claude/claude', '-p', prompt, '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions',
];

async function timeRaw(): Promise<number> {
  const started = performance.now();
  const { stdout } = await exec('podman', rawArgs, { maxBuffer: 64 * 1024 * 1024 });
  if (!stdout.includes('"result":"benchmark"')) throw new Error(`raw podman run gave an unexpected answer: ${stdout.slice(-300)}`);
  return performance.now() - started;
}

async function timeBerth(): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${berth.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt }),
  });
  const body = (await response.json()) as { output?: string; error?: string };
  if (response.status !== 200 || body.output !== 'benchmark') throw new Error(`POST /run failed: ${response.status} ${JSON.stringify(body)}`);
  return performance.now() - started;
}

try {
  process.stderr.write(`warming up (${warmups} runs each)…\n`);
  for (let i = 0; i < warmups; i++) {
    await timeRaw();
    await timeBerth();
  }
  const raw: number[] = [];
  const viaBerth: number[] = [];
  for (let i = 0; i < runs; i++) {
    raw.push(await timeRaw());
    viaBerth.push(await timeBerth());
    process.stderr.write(`  run ${i + 1}/${runs}: raw ${raw.at(-1)!.toFixed(0)} ms, berth ${viaBerth.at(-1)!.toFixed(0)} ms\n`);
  }
  const rawMedian = median(raw);
  const berthMedian = median(viaBerth);
  console.log(`raw podman run   median ${rawMedian.toFixed(0)} ms  (min ${Math.min(...raw).toFixed(0)}, max ${Math.max(...raw).toFixed(0)}, n=${runs})`);
  console.log(`POST /run        median ${berthMedian.toFixed(0)} ms  (min ${Math.min(...viaBerth).toFixed(0)}, max ${Math.max(...viaBerth).toFixed(0)}, n=${runs})`);
  console.log(`ratio (berth / raw): ${(berthMedian / rawMedian).toFixed(3)}`);
} finally {
  await berth.stop();
  await model.close();
  await exec('podman', ['secret', 'rm', secret]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}
