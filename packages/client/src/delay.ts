// Waiting that an AbortSignal can cut short; back-off arithmetic shared by retries, polling and reconnection.

/** Resolves after `ms`, or rejects with the signal's reason as soon as it is aborted. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface BackoffOptions {
  /** First wait in milliseconds. */
  readonly initial: number;
  /** No wait is longer than this. */
  readonly max: number;
  /** Each wait is the previous one times this. Default 2. */
  readonly factor?: number;
  /**
   * Fraction of each wait that is random (0 = exact, 0.5 = between half and all of it), so that many
   * clients refused at the same moment do not all come back at the same moment. Default 0.
   */
  readonly jitter?: number;
  /** Source of randomness in [0, 1); injectable for tests. */
  readonly random?: () => number;
}

/** The wait before attempt `attempt` (0 for the first retry): exponential, capped, optionally jittered. */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const factor = options.factor ?? 2;
  const full = Math.min(options.max, options.initial * factor ** Math.max(0, attempt));
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0));
  return Math.round(full * (1 - jitter * (options.random ?? Math.random)()));
}

/**
 * A Retry-After header as milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
