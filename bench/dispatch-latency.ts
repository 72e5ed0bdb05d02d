// Job dispatch latency on a shared database (issue 26's bench row; docs/jobs.md "Several nodes"): the time from
// an async job's submission to its claim by a node, on the database's clock (queued_at and claimed_at of the
// job's row: the API does not show them). Two paths: `local`, the node that received the job had a free slot
// and claimed it at submission (0 by construction); `queued`, the job waited in the shared queue and a node
// woken by NOTIFY (or the 2 s poll) claimed it. The target (p50 <= 50 ms) is about the queued path; the time a
// job waits because every slot of the cluster is busy is not dispatch, so jobs are submitted `intervalMs`
// apart and the caller should leave slots free (e.g. submit to a node with SERVICE_MAX_CONCURRENT_RUNS=1).
//   npx tsx bench/dispatch-latency.ts --url http://127.0.0.1:8080 --database postgres://... [--jobs 40] [--interval-ms 250]
//     [--one-at-a-time] [--token T]
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { percentile } from '../test/support/load.js';

export interface DispatchLatencyOptions {
  /** A node's (or the load balancer's) base URL. */
  readonly baseUrl: string;
  /** The cluster's database (SERVICE_DATABASE_URL), read for each job's queued_at and claimed_at. */
  readonly databaseUrl: string;
  readonly jobs: number;
  /** Between two submissions (default 250 ms). */
  readonly intervalMs?: number;
  /** Extra request headers (authorization). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Default: a one-line answer of the offline model. */
  readonly prompt?: string;
  /** How long to wait for every job to be claimed (default 120 s). */
  readonly claimTimeoutMs?: number;
  /**
   * Wait for each job to finish before submitting the next: with a free slot somewhere in the cluster, every
   * queued sample is then dispatch alone, never time spent waiting for a slot.
   */
  readonly oneAtATime?: boolean;
}

export interface DispatchSample {
  readonly jobId: string;
  readonly path: 'local' | 'queued';
  /** Submission (queued_at) to claim (claimed_at), milliseconds, the database's clock. */
  readonly ms: number;
  readonly acceptedBy: string;
  readonly claimedBy: string;
}

export interface DispatchLatency {
  readonly samples: readonly DispatchSample[];
  readonly local: number;
  readonly queued: number;
  /** Of the queued path (null when no job went through the queue). */
  readonly queued_p50_ms: number | null;
  readonly queued_p95_ms: number | null;
  /** Of every job, the local path counting 0. */
  readonly all_p50_ms: number;
  readonly target_queued_p50_ms: 50;
}

interface ClaimRow {
  id: string;
  accepted_by: string;
  claimed_by: string | null;
  local: boolean;
  ms: number | null;
}

/** Submits `jobs` async jobs to `baseUrl`, waits until each is claimed, and reads how long each waited. */
export async function measureDispatchLatency(options: DispatchLatencyOptions): Promise<DispatchLatency> {
  const ids: string[] = [];
  for (let n = 0; n < options.jobs; n += 1) {
    const response = await fetch(`${options.baseUrl}/run/async`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...options.headers },
      body: JSON.stringify({ prompt: options.prompt ?? `say: dispatch ${n}` }),
    });
    const body = (await response.json()) as { job_id?: string; error?: string };
    if (!response.ok || body.job_id === undefined) throw new Error(`POST /run/async answered ${response.status}: ${JSON.stringify(body)}`);
    ids.push(body.job_id);
    if (options.oneAtATime) await finished(options, body.job_id);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 250));
  }
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  try {
    const deadline = Date.now() + (options.claimTimeoutMs ?? 120_000);
    for (;;) {
      const { rows } = await client.query<ClaimRow>(
        `SELECT id, accepted_by, claimed_by, claimed_at = queued_at AS local,
           (extract(epoch FROM claimed_at - queued_at) * 1000)::float8 AS ms
         FROM jobs WHERE id = ANY($1::text[])`,
        [ids],
      );
      const claimed = rows.filter((row) => row.claimed_by !== null && row.ms !== null);
      if (claimed.length === ids.length) return summarize(claimed);
      if (Date.now() > deadline) throw new Error(`${ids.length - claimed.length} of ${ids.length} jobs were not claimed in time`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await client.end();
  }
}

async function finished(options: DispatchLatencyOptions, jobId: string): Promise<void> {
  const deadline = Date.now() + (options.claimTimeoutMs ?? 120_000);
  for (;;) {
    const response = await fetch(`${options.baseUrl}/jobs/${jobId}`, { headers: { ...options.headers } });
    const body = (await response.json()) as { status?: string };
    if (body.status !== undefined && !['pending', 'running'].includes(body.status)) return;
    if (Date.now() > deadline) throw new Error(`job ${jobId} did not finish in time`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function summarize(rows: readonly ClaimRow[]): DispatchLatency {
  const samples: DispatchSample[] = rows.map((row) => ({
    jobId: row.id,
    path: row.local ? 'local' : 'queued',
    ms: row.local ? 0 : row.ms!,
    acceptedBy: row.accepted_by,
    claimedBy: row.claimed_by!,
  }));
  const queued = samples.filter((sample) => sample.path === 'queued').map((sample) => sample.ms);
  return {
    samples,
    local: samples.length - queued.length,
    queued: queued.length,
    queued_p50_ms: queued.length > 0 ? percentile(queued, 50) : null,
    queued_p95_ms: queued.length > 0 ? percentile(queued, 95) : null,
    all_p50_ms: percentile(samples.map((sample) => sample.ms), 50),
    target_queued_p50_ms: 50,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      database: { type: 'string' },
      jobs: { type: 'string', default: '40' },
      'interval-ms': { type: 'string', default: '250' },
      'one-at-a-time': { type: 'boolean', default: false },
      token: { type: 'string' },
    },
  });
  if (!values.url || !values.database) throw new Error('usage: dispatch-latency.ts --url <base URL> --database <postgres URL> [--jobs N] [--interval-ms MS] [--token T]');
  const result = await measureDispatchLatency({
    baseUrl: values.url,
    databaseUrl: values.database,
    jobs: Number(values.jobs),
    intervalMs: Number(values['interval-ms']),
    oneAtATime: values['one-at-a-time'],
    ...(values.token ? { headers: { authorization: `Bearer ${values.token}` } } : {}),
  });
  const { samples: _samples, ...rows } = result;
  console.log(JSON.stringify(rows, null, 2));
}
