// Images: the host's images with their compatibility ranks, one image, a registry search, and pulls.

import { answer, type Api } from './api.js';
import { BerthError, BerthNetworkError } from './errors.js';
import { readSse } from './sse.js';
import type { CallOptions, Image, ImageList, ImageSearchResults, PullProgress, PullRequest, PullResult, PullStreamFrame } from './types.js';

export interface PullOptions extends CallOptions, Omit<PullRequest, 'image'> {
  /**
   * Told when the pull starts, at each line of progress Berth reports, and when it is done. Given, the pull
   * is asked for as an event stream; without it, Berth's JSON answer is awaited.
   */
  onProgress?: (progress: PullProgress) => void;
}

export class Images {
  constructor(private readonly api: Api) {}

  /** Local images, best compatibility rank first. */
  async list(options: CallOptions = {}): Promise<ImageList> {
    return answer(await this.api.GET('/images', { signal: options.signal }));
  }

  /** One local image by reference, e.g. `localhost/berth-agent:0.1.0-alpha` (404 BerthError when absent). */
  async get(name: string, options: CallOptions = {}): Promise<Image> {
    return answer(await this.api.GET('/images/{name}', { params: { path: { name } }, signal: options.signal }));
  }

  /** Searches registries; `host:port/term` searches that registry only. */
  async search(query: string, options: CallOptions & { limit?: number } = {}): Promise<ImageSearchResults> {
    return answer(await this.api.GET('/images/search', { params: { query: { q: query, limit: options.limit } }, signal: options.signal }));
  }

  /**
   * Pulls an image (it must be allowed by the server's image patterns) and answers once it is present. A
   * failed pull rejects with the BerthError the server gave (404 no such image, 502 registry failure),
   * whether it came as a status or as the stream's `error` frame. Aborting stops the pull on the server.
   */
  async pull(image: string, options: PullOptions = {}): Promise<PullResult> {
    const { signal, onProgress, ...rest } = options;
    const body = { image, ...rest };
    if (!onProgress) return answer(await this.api.POST('/images/pull', { body, signal }));

    const started = Date.now();
    onProgress({ phase: 'started', image, elapsed_ms: 0 });
    const { data, response } = await this.api.POST('/images/pull', {
      body,
      params: { header: { accept: 'text/event-stream' } },
      parseAs: 'stream',
      signal,
    });
    const result = response.headers.get('content-type')?.startsWith('text/event-stream')
      ? await followPull(data ?? null, signal, (frame) => onProgress({ phase: 'progress', image, elapsed_ms: Date.now() - started, ...withoutType(frame) }))
      : // A Berth that does not stream pulls answers JSON whatever was asked.
        ((await response.json()) as PullResult);
    onProgress({ phase: 'done', image, elapsed_ms: Date.now() - started, result });
    return result;
  }
}

type ProgressFrame = Extract<PullStreamFrame, { type: 'progress' }>;

/** The frames of a streamed pull up to its `done` (its answer) or `error` (thrown as the BerthError it stands for). */
async function followPull(stream: ReadableStream<Uint8Array> | null, signal: AbortSignal | undefined, onFrame: (frame: ProgressFrame) => void): Promise<PullResult> {
  try {
    for await (const message of readSse(stream)) {
      const frame = JSON.parse(message.data) as PullStreamFrame;
      if (frame.type === 'progress') onFrame(frame);
      else if (frame.type === 'done') return withoutType(frame);
      else if (frame.type === 'error') throw new BerthError(frame.status ?? 500, frame.error, frame);
    }
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (error instanceof BerthError) throw error;
    throw new BerthNetworkError(`the pull stream broke off: ${(error as Error).message}`, { cause: error });
  }
  if (signal?.aborted) throw signal.reason;
  throw new BerthNetworkError('the pull stream ended before the pull finished (no done or error frame)');
}

function withoutType<F extends { type: string }>(frame: F): Omit<F, 'type'> {
  const { type: _type, ...rest } = frame;
  return rest;
}
