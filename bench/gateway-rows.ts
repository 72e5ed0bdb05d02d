// The model gateway's row of `make bench` (docs/performance.md): the time to the first streamed byte of a
// streaming POST /v1/messages to the offline model, straight to the model and through Berth's gateway (the
// real one: a per-run credential looked up in RunGrants, the budgets checked, the answer piped and its
// usage recorded in a usage store), from the same client in the same process, interleaved pair by pair
// with the order alternating, so both sides see the same machine. The issue's budget: at most 5 ms added
// at the median.
//   npx tsx bench/gateway-rows.ts [--samples N]     (alone; berth-vs-raw.ts runs it too)
import { Agent, request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { startOfflineModel } from '../src/offline-model/server.js';
import { startGateway } from '../src/gateway/gateway-server.js';
import { RunGrants } from '../src/core/gateway/run-grants.js';
import { Budgets } from '../src/core/gateway/budgets.js';
import { SqliteGrantStore } from '../src/store/gateway/sqlite-grant-store.js';
import { SqliteUsageStore } from '../src/store/usage/sqlite-usage-store.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { percentile } from '../test/support/load.js';
import type { Histogram } from 'prom-client';

export interface GatewayRows {
  samples: number;
  direct_p50_ms: number;
  direct_p95_ms: number;
  gateway_p50_ms: number;
  gateway_p95_ms: number;
  /** Gateway minus direct, of the medians and of the 95th percentiles. */
  added_p50_ms: number;
  added_p95_ms: number;
  /** The gateway's own measure of what it added (berth_gateway_overhead_seconds), p50 from its records. */
  gateway_reported_p50_ms: number;
  target_added_p50_ms: number;
}

export const DEFAULT_SAMPLES = 300;
const WARM_UP = 30;
const TARGET_ADDED_P50_MS = 5;
/** A main-loop request (not a side request): max_tokens above the offline model's side-request bound. */
const BODY = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 32_000, stream: true, messages: [{ role: 'user', content: 'say: benchmark' }] });

/** Milliseconds from sending the request to the first byte of the answer's body; the answer is read to its end. */
function firstByteMs(agent: Agent, port: number, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first: number | undefined;
    const outgoing = request(
      { agent, host: '127.0.0.1', port, method: 'POST', path: '/v1/messages', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) } },
      (response) => {
        if (response.statusCode !== 200) reject(new Error(`status ${response.statusCode}`));
        response.on('data', () => {
          first ??= performance.now() - started;
        });
        response.on('end', () => (first === undefined ? reject(new Error('an answer without a body')) : resolve(first)));
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(BODY);
  });
}

export async function measureGateway(samples: number, log: (line: string) => void): Promise<GatewayRows> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-gateway-'));
  const key = `sk-bench-${randomBytes(12).toString('hex')}`;
  const model = await startOfflineModel({ host: '127.0.0.1', port: 0, apiKey: key });
  const grantStore = new SqliteGrantStore(join(dir, 'grants.db'));
  const usageStore = new SqliteUsageStore(join(dir, 'usage.db'));
  const grants = new RunGrants(grantStore);
  const budgets = new Budgets({}, usageStore);
  const metrics = createMetrics();
  const runId = 'run-bench-gateway';
  const token = grants.issue(runId);
  grants.bind(runId, { kind: 'run', runId, caller: 'bench', policy: { mode: 'none' } });
  const gateway = await startGateway({
    host: '127.0.0.1',
    port: 0,
    upstream: { baseUrl: model.url, credential: { kind: 'api_key', value: key } },
    grants,
    budgets,
    usage: budgets.recorder(usageStore),
    onBudgetRefusal: () => undefined,
    metrics,
    log: () => undefined,
  });
  // One kept-alive connection per side, as the engine keeps its own to the gateway.
  const directAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  const gatewayAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  const direct: number[] = [];
  const through: number[] = [];
  try {
    for (let i = 0; i < WARM_UP; i++) {
      await firstByteMs(directAgent, model.port, key);
      await firstByteMs(gatewayAgent, gateway.port, token);
    }
    metrics.gatewayOverhead.reset();
    for (let i = 0; i < samples; i++) {
      // Alternate which side goes first, so neither always runs on a machine the other just warmed.
      if (i % 2 === 0) {
        direct.push(await firstByteMs(directAgent, model.port, key));
        through.push(await firstByteMs(gatewayAgent, gateway.port, token));
      } else {
        through.push(await firstByteMs(gatewayAgent, gateway.port, token));
        direct.push(await firstByteMs(directAgent, model.port, key));
      }
      if ((i + 1) % 100 === 0) log(`  gateway: ${i + 1}/${samples} pairs`);
    }
    // The measured path is the whole one: every request through the gateway was recorded for its run.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const recorded = (await usageStore.run('bench', runId))?.requests ?? 0;
    if (recorded !== WARM_UP + samples) throw new Error(`the gateway recorded ${recorded} requests of ${WARM_UP + samples}`);
  } finally {
    directAgent.destroy();
    gatewayAgent.destroy();
    await gateway.close();
    await model.close();
    grantStore.close();
    await usageStore.close();
    await rm(dir, { recursive: true, force: true });
  }
  const round = (ms: number) => Math.round(ms * 100) / 100;
  const p = (values: number[], q: number) => round(percentile(values, q));
  const overhead = (await metrics.gatewayOverhead.get()).values;
  return {
    samples,
    direct_p50_ms: p(direct, 50),
    direct_p95_ms: p(direct, 95),
    gateway_p50_ms: p(through, 50),
    gateway_p95_ms: p(through, 95),
    added_p50_ms: round(percentile(through, 50) - percentile(direct, 50)),
    added_p95_ms: round(percentile(through, 95) - percentile(direct, 95)),
    gateway_reported_p50_ms: round(histogramMedianMs(overhead)),
    target_added_p50_ms: TARGET_ADDED_P50_MS,
  };
}

/** The median of a prom-client histogram's values, by linear interpolation inside its bucket (ms). */
function histogramMedianMs(values: Awaited<ReturnType<Histogram['get']>>['values']): number {
  const buckets = values
    .filter((v) => v.metricName?.endsWith('_bucket') && v.labels.le !== '+Inf')
    .map((v) => ({ le: Number(v.labels.le), count: v.value }))
    .sort((a, b) => a.le - b.le);
  const total = values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  if (total === 0) return 0;
  let lower = 0;
  let below = 0;
  for (const bucket of buckets) {
    if (bucket.count >= total / 2) return (lower + ((total / 2 - below) / Math.max(1, bucket.count - below)) * (bucket.le - lower)) * 1000;
    lower = bucket.le;
    below = bucket.count;
  }
  return lower * 1000;
}

export function printGatewayRows(rows: GatewayRows): void {
  console.log(`\n| model gateway (${rows.samples} streaming requests each, interleaved) | value |\n|---|---|`);
  console.log(`| first streamed byte, direct to the model, p50 / p95 | ${rows.direct_p50_ms} / ${rows.direct_p95_ms} ms |`);
  console.log(`| first streamed byte through the gateway, p50 / p95 | ${rows.gateway_p50_ms} / ${rows.gateway_p95_ms} ms |`);
  console.log(`| added by the gateway, p50 / p95 (target p50 <= ${rows.target_added_p50_ms} ms) | ${rows.added_p50_ms} / ${rows.added_p95_ms} ms |`);
  console.log(`| the gateway's own measure (berth_gateway_overhead_seconds), p50 | ${rows.gateway_reported_p50_ms} ms |`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { samples: { type: 'string', default: String(DEFAULT_SAMPLES) } } });
  const rows = await measureGateway(Number(values.samples), (line) => process.stderr.write(`${line}\n`));
  printGatewayRows(rows);
  if (rows.added_p50_ms > rows.target_added_p50_ms) process.exitCode = 1;
}
