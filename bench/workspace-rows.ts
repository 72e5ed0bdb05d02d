// The workspace rows of `make bench` (docs/performance.md): measured against the pooled Berth of
// berth-vs-raw.ts, in its process.
//  1. Sequential runs with an uploaded workspace (each a new session) against runs without one, alternately:
//     the pool's hit rate with a workspace and the p50 ratio (the budget: >= 90 % hits, <= 1.2x).
//  2. A 100 MB tree of 10,000 files: packed, uploaded and extracted (POST /workspaces/:id/archive), then
//     downloaded and unpacked (GET /workspaces/:id/archive), each side by side with `tar` doing the same
//     locally on the same files (tar -cz | tar -xz), alternately.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { percentile } from '../test/support/load.js';

export interface WorkspaceRows {
  runs_each: number;
  with_workspace_p50_ms: number;
  without_workspace_p50_ms: number;
  p50_ratio: number;
  pool_hit_rate_with_workspace: number;
  tree: { files: number; bytes: number };
  upload_extract_ms: number;
  local_tar_ms: number;
  upload_ratio: number;
  download_ms: number;
  download_ratio: number;
}

export interface WorkspaceBenchTarget {
  readonly url: string;
  readonly metricsUrl: string;
  /** Waits until the pool is full again, and pauses as before every timed batch. */
  poolReady(): Promise<void>;
  counter(url: string, name: string): Promise<number>;
}

const TREE_FILES = 10_000;
const FILE_BYTES = 10 * 1024;
const ROUNDS = 3;

async function json<T>(response: Response): Promise<T> {
  const body = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(`${response.status}: ${body.error ?? JSON.stringify(body)}`);
  return body;
}

async function createWorkspace(url: string): Promise<string> {
  return (await json<{ id: string }>(await fetch(`${url}/workspaces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }))).id;
}

async function timedRun(url: string, workspace: string | undefined): Promise<number> {
  const started = performance.now();
  const body = await json<{ output: string }>(
    await fetch(`${url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'say: benchmark', ...(workspace ? { workspace } : {}) }) }),
  );
  if (body.output !== 'benchmark') throw new Error(`unexpected output ${body.output}`);
  return performance.now() - started;
}

/** Runs a shell pipeline; resolves with its duration. */
function shell(command: string, stdin?: ReadableStream<Uint8Array>): Promise<{ ms: number; stdout: Readable }> {
  const started = performance.now();
  const child = spawn('sh', ['-c', command], { stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'inherit'] });
  if (stdin) Readable.fromWeb(stdin as never).pipe(child.stdin!);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ ms: performance.now() - started, stdout: child.stdout! }) : reject(new Error(`${command}: exit ${code}`))));
  });
}

/** 10,000 files of 10 KiB in 100 directories: half text (compresses), half random bytes (does not). */
async function makeTree(root: string): Promise<void> {
  for (let d = 0; d < 100; d++) {
    const dir = join(root, `dir-${d}`);
    await mkdir(dir, { recursive: true });
    for (let f = 0; f < TREE_FILES / 100; f++) {
      const content = f % 2 === 0 ? Buffer.from(`line ${d}/${f}\n`.repeat(FILE_BYTES / 12).slice(0, FILE_BYTES)) : randomBytes(FILE_BYTES);
      await writeFile(join(dir, `file-${f}.txt`), content);
    }
  }
}

export async function measureWorkspaces(target: WorkspaceBenchTarget, scratch: string, log: (line: string) => void): Promise<WorkspaceRows> {
  const { url } = target;
  // 1. Runs with and without a workspace, alternately, each after the pool has refilled.
  const runsEach = 10;
  const withMs: number[] = [];
  const withoutMs: number[] = [];
  let hits = 0;
  const small = await createWorkspace(url);
  await fetch(`${url}/workspaces/${small}/files/README.md`, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: '# bench\n' });
  for (let i = 0; i < runsEach; i++) {
    await target.poolReady();
    withoutMs.push(await timedRun(url, undefined));
    await target.poolReady();
    const before = await target.counter(target.metricsUrl, 'berth_pool_hits_total{pool="run"}');
    withMs.push(await timedRun(url, small));
    hits += (await target.counter(target.metricsUrl, 'berth_pool_hits_total{pool="run"}')) - before;
  }
  log(`  runs with a workspace: ${runsEach} each`);

  // 2. The 100 MB tree, against tar locally.
  const work = await mkdtemp(join(scratch, 'ws-bench-'));
  const tree = join(work, 'tree');
  await makeTree(tree);
  const upload: number[] = [];
  const local: number[] = [];
  const download: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const localOut = join(work, `local-${round}`);
      await mkdir(localOut);
      local.push((await shell(`tar -czf - -C '${tree}' . | tar -xzf - -C '${localOut}'`)).ms);
      await rm(localOut, { recursive: true, force: true });

      const id = await createWorkspace(url);
      const started = performance.now();
      const packer = spawn('tar', ['-czf', '-', '-C', tree, '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
      await json(
        await fetch(`${url}/workspaces/${id}/archive`, {
          method: 'POST',
          headers: { 'content-type': 'application/octet-stream' },
          body: Readable.toWeb(packer.stdout) as ReadableStream,
          duplex: 'half',
        } as RequestInit),
      );
      upload.push(performance.now() - started);

      const downloadOut = join(work, `download-${round}`);
      await mkdir(downloadOut);
      const fetched = performance.now();
      const response = await fetch(`${url}/workspaces/${id}/archive`);
      if (!response.ok || !response.body) throw new Error(`GET archive: ${response.status}`);
      await shell(`tar -xzf - -C '${downloadOut}'`, response.body);
      download.push(performance.now() - fetched);
      await rm(downloadOut, { recursive: true, force: true });
      await fetch(`${url}/workspaces/${id}`, { method: 'DELETE' });
      log(`  100 MB tree, round ${round + 1}/${ROUNDS}`);
    }
  } finally {
    await rm(work, { recursive: true, force: true });
    await fetch(`${url}/workspaces/${small}`, { method: 'DELETE' });
  }
  const p50 = (values: number[]) => Math.round(percentile(values, 50));
  const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
  return {
    runs_each: runsEach,
    with_workspace_p50_ms: p50(withMs),
    without_workspace_p50_ms: p50(withoutMs),
    p50_ratio: ratio(p50(withMs), p50(withoutMs)),
    pool_hit_rate_with_workspace: ratio(hits, runsEach),
    tree: { files: TREE_FILES, bytes: TREE_FILES * FILE_BYTES },
    upload_extract_ms: p50(upload),
    local_tar_ms: p50(local),
    upload_ratio: ratio(p50(upload), p50(local)),
    download_ms: p50(download),
    download_ratio: ratio(p50(download), p50(local)),
  };
}

export function printWorkspaceRows(rows: WorkspaceRows): void {
  console.log(`\n| workspaces | value |\n|---|---|`);
  console.log(`| sequential runs with an uploaded workspace vs without, p50 (${rows.runs_each} each, pool on) | ${rows.with_workspace_p50_ms} / ${rows.without_workspace_p50_ms} ms (${rows.p50_ratio}×) |`);
  console.log(`| pool hits of runs with a workspace | ${Math.round(rows.pool_hit_rate_with_workspace * 100)} % |`);
  console.log(`| upload + extract of ${rows.tree.files} files, ${Math.round(rows.tree.bytes / 2 ** 20)} MiB (POST archive) vs local tar -cz \\| tar -xz | ${rows.upload_extract_ms} / ${rows.local_tar_ms} ms (${rows.upload_ratio}×) |`);
  console.log(`| download + unpack (GET archive) vs local tar | ${rows.download_ms} / ${rows.local_tar_ms} ms (${rows.download_ratio}×) |`);
}
