// Concurrent mixed load against a running Berth, as many callers would send it: sync runs, async jobs
// polled to their end, and streams read to their last frame. Used by the concurrency test, the
// newcomer test and the benchmark.
import { sseData } from './sse.js';

export type LoadMode = 'sync' | 'async' | 'stream';

export interface LoadResult {
  readonly index: number;
  readonly mode: LoadMode;
  readonly ok: boolean;
  /** The run's output as the caller sees it (sync: output; async: job output; stream: joined output frames). */
  readonly output: string;
  readonly error?: string;
  readonly ms: number;
}

export interface LoadOptions {
  readonly url: string;
  readonly headers?: Record<string, string>;
  readonly total: number;
  readonly concurrency: number;
  /** Which mode request `index` uses (default: all sync). */
  readonly modeOf?: (index: number) => LoadMode;
  readonly promptOf?: (index: number) => string;
}

/** Two sync runs to every async job and stream, interleaved. */
export const mixedModes = (index: number): LoadMode => (['sync', 'async', 'sync', 'stream'] as const)[index % 4]!;

export async function runLoad(options: LoadOptions): Promise<LoadResult[]> {
  const results: LoadResult[] = [];
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < options.total; index = next++) {
      const mode = options.modeOf?.(index) ?? 'sync';
      const prompt = options.promptOf?.(index) ?? `say: load ${index}`;
      const started = performance.now();
      try {
        const output = await runOne(options, mode, prompt);
        results.push({ index, mode, ok: true, output, ms: performance.now() - started });
      } catch (error) {
        results.push({ index, mode, ok: false, output: '', error: (error as Error).message, ms: performance.now() - started });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, options.total) }, worker));
  return results.sort((a, b) => a.index - b.index);
}

async function runOne(options: LoadOptions, mode: LoadMode, prompt: string): Promise<string> {
  const headers = { 'content-type': 'application/json', ...options.headers };
  switch (mode) {
    case 'sync': {
      const response = await fetch(`${options.url}/run`, { method: 'POST', headers, body: JSON.stringify({ prompt }) });
      const body = (await response.json()) as { output?: string; error?: string };
      if (response.status !== 200) throw new Error(`POST /run: ${response.status} ${JSON.stringify(body)}`);
      return body.output ?? '';
    }
    case 'async': {
      const response = await fetch(`${options.url}/run/async`, { method: 'POST', headers, body: JSON.stringify({ prompt }) });
      const body = (await response.json()) as { job_id?: string; error?: string };
      if (response.status !== 200 || !body.job_id) throw new Error(`POST /run/async: ${response.status} ${JSON.stringify(body)}`);
      for (let wait = 50; ; wait = Math.min(wait * 2, 500)) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        const polled = await fetch(`${options.url}/jobs/${body.job_id}`, { headers: options.headers });
        const job = (await polled.json()) as { status: string; output?: string; error?: string };
        if (polled.status !== 200) throw new Error(`GET /jobs/${body.job_id}: ${polled.status} ${JSON.stringify(job)}`);
        if (job.status === 'completed') return job.output ?? '';
        if (job.status !== 'pending' && job.status !== 'running') throw new Error(`job ${body.job_id} ended ${job.status}: ${job.error}`);
      }
    }
    case 'stream': {
      const response = await fetch(`${options.url}/run/stream?${new URLSearchParams({ prompt })}`, { headers: options.headers });
      if (response.status !== 200) throw new Error(`GET /run/stream: ${response.status} ${await response.text()}`);
      const text = await response.text();
      const frames = sseData<{ type: string; content?: string; error?: string }>(text);
      const last = frames.at(-1);
      if (last?.type !== 'done') throw new Error(`stream ended with ${JSON.stringify(last)}`);
      return frames.filter((f) => f.type === 'output').map((f) => f.content ?? '').join('');
    }
  }
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
