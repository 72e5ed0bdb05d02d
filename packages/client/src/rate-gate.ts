// Keeps a client under Berth's rate limit instead of running into it. Berth's answers carry
// X-RateLimit-Remaining (whole requests left in this client's bucket) and, on 429, Retry-After. When
// the bucket is empty, or a 429 said when to come back, requests wait and then go one at a time: each
// waits for the answer to the one before, so a burst of calls drains at the server's pace instead of
// all of them being refused again at the same moment.

import { delay, retryAfterMs } from './delay.js';

/**
 * Berth refills its buckets continuously but answers Retry-After in whole seconds (at least 1): a second
 * is therefore what the server itself would ask a client with an empty bucket to wait.
 */
export const EMPTY_BUCKET_PAUSE_MS = 1000;

export class RateGate {
  /** Epoch milliseconds before which no request should be sent. */
  private notBefore = 0;
  /** The turn of the last request that queued while limited; each queued request waits for it. */
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;

  private readonly now: () => number;
  private readonly emptyBucketPauseMs: number;

  constructor(options: { now?: () => number; emptyBucketPauseMs?: number } = {}) {
    this.now = options.now ?? Date.now;
    this.emptyBucketPauseMs = options.emptyBucketPauseMs ?? EMPTY_BUCKET_PAUSE_MS;
  }

  /**
   * Resolves when a request may be sent. The returned function must be called once its answer (or
   * failure) is known: it lets the next queued request go.
   */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.notBefore <= this.now() && this.queued === 0) return () => undefined;
    let release!: () => void;
    const turn = new Promise<void>((resolve) => (release = resolve));
    const previous = this.queue;
    this.queue = previous.then(() => turn);
    this.queued += 1;
    let released = false;
    const done = () => {
      if (released) return;
      released = true;
      this.queued -= 1;
      release();
    };
    try {
      await abortable(previous, signal);
      await delay(this.notBefore - this.now(), signal);
    } catch (error) {
      // A request given up while waiting gives its turn to the next one at once.
      done();
      throw error;
    }
    return done;
  }

  /** Learns from an answer's headers when the next request may go. */
  observe(response: Response): void {
    const retryAfter = response.status === 429 ? retryAfterMs(response.headers.get('retry-after'), this.now()) : undefined;
    const remaining = response.headers.get('x-ratelimit-remaining');
    const pause = retryAfter ?? (response.status === 429 || remaining?.trim() === '0' ? this.emptyBucketPauseMs : 0);
    if (pause > 0) this.notBefore = Math.max(this.notBefore, this.now() + pause);
  }
}

function abortable(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      reject,
    );
  });
}
