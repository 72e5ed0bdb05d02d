// Images: the host's images with their compatibility ranks, one image, a registry search, and pulls.

import { answer, type Api } from './api.js';
import type { CallOptions, Image, ImageList, ImageSearchResults, PullProgress, PullRequest, PullResult } from './types.js';

/** How often a pull in progress is reported to onProgress. */
const PULL_PROGRESS_INTERVAL_MS = 500;

export interface PullOptions extends CallOptions, Omit<PullRequest, 'image'> {
  /** Told when the pull starts, about every half second while Berth pulls, and when it is done. */
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
   * Pulls an image (it must be allowed by the server's image patterns). Berth answers once the image is
   * present; meanwhile onProgress hears how long it has been going.
   */
  async pull(image: string, options: PullOptions = {}): Promise<PullResult> {
    const { signal, onProgress, ...rest } = options;
    const started = Date.now();
    onProgress?.({ phase: 'started', image, elapsed_ms: 0 });
    const ticker = onProgress && setInterval(() => onProgress({ phase: 'waiting', image, elapsed_ms: Date.now() - started }), PULL_PROGRESS_INTERVAL_MS);
    try {
      const result = answer(await this.api.POST('/images/pull', { body: { image, ...rest }, signal }));
      onProgress?.({ phase: 'done', image, elapsed_ms: Date.now() - started, result });
      return result;
    } finally {
      clearInterval(ticker);
    }
  }
}
