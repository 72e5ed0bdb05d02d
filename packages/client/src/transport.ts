// The one way requests reach Berth. Every call of the SDK, typed (openapi-fetch) or streamed, goes through
// Transport.fetch, which adds the access token, keeps to the rate limit, sends again what may be sent
// again (retry-policy.ts), renews the token after a 401, and turns every non-2xx answer into a
// BerthError: what it returns is always a 2xx response. A request whose body is a stream (a workspace
// upload) cannot be sent twice without keeping a copy of everything it sent: sendOnce sends it as it is,
// once, with no clone, so an upload of gigabytes never sits in memory.

import { backoffDelay, delay, retryAfterMs, type BackoffOptions } from './delay.js';
import { BerthError, BerthNetworkError } from './errors.js';
import { RateGate } from './rate-gate.js';
import { retryPolicy } from './retry-policy.js';
import type { TokenManager } from './tokens.js';

/** Routes that take no access token (an API token or a refresh token is their credential, or none). */
/** What a request that cannot be sent twice may be sent again after: nothing. */
const NOT_REPEATED = { statuses: new Set<number>(), networkErrors: false };

const OPEN_ROUTES = new Set(['/health', '/version', '/auth/token', '/auth/refresh', '/swagger/doc.json']);

/** Waits between retries when Berth gives no Retry-After: 0.5 s, 1 s, 2 s, … at most 8 s, jittered. */
export const RETRY_BACKOFF: BackoffOptions = { initial: 500, max: 8000, jitter: 0.5 };

export interface TransportOptions {
  /** Berth's base URL, e.g. http://127.0.0.1:8080 (a path prefix behind a proxy is kept). */
  readonly baseUrl: string;
  readonly fetch: typeof fetch;
  readonly tokens: TokenManager;
  /** Retries after the first attempt. */
  readonly retries: number;
  readonly userAgent?: string;
  readonly backoff?: BackoffOptions;
  readonly gate?: RateGate;
}

export class Transport {
  readonly baseUrl: string;
  private readonly basePath: string;
  private readonly gate: RateGate;

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.basePath = new URL(this.baseUrl).pathname.replace(/\/+$/, '');
    this.gate = options.gate ?? new RateGate();
  }

  /** Sends a request (with retries) and answers its 2xx response; throws BerthError for any other status. */
  readonly fetch = (input: Request): Promise<Response> => this.send(input, true);

  /**
   * Sends a request whose body can be read only once: never cloned, never sent again (not after a 401
   * either: the tokens are renewed, and the refusal is the error, for the caller to send a new body).
   */
  readonly sendOnce = (input: Request): Promise<Response> => this.send(input, false);

  private async send(input: Request, replayable: boolean): Promise<Response> {
    const signal = input.signal;
    const method = input.method.toUpperCase();
    const path = this.routePath(input.url);
    const policy = replayable ? retryPolicy(method, path) : NOT_REPEATED;
    const needsToken = !OPEN_ROUTES.has(path) && !input.headers.has('authorization');
    let retried = 0;
    let renewedToken = false;
    for (;;) {
      signal.throwIfAborted();
      const authorization = needsToken ? await this.options.tokens.authorization() : undefined;
      const request = replayable ? input.clone() : input;
      if (authorization) request.headers.set('authorization', authorization);
      if (this.options.userAgent) request.headers.set('user-agent', this.options.userAgent);

      const release = await this.gate.acquire(signal);
      let response: Response;
      try {
        response = await this.options.fetch(request);
      } catch (error) {
        release();
        if (signal.aborted) throw signal.reason;
        if (policy.networkErrors && retried < this.options.retries) {
          await delay(backoffDelay(retried++, this.backoff), signal);
          continue;
        }
        throw new BerthNetworkError(`${method} ${input.url} failed: ${describe(error)}`, { cause: error });
      }
      this.gate.observe(response);
      release();
      if (response.ok) return response;

      if (response.status === 401 && authorization && !renewedToken) {
        renewedToken = true;
        const refused = await BerthError.fromResponse(response);
        if ((await this.options.tokens.recover(authorization)) && replayable) continue;
        throw refused;
      }
      if (policy.statuses.has(response.status) && retried < this.options.retries) {
        // A 429 waits in the rate gate (which read its Retry-After); a 503 waits here.
        const wait = response.status === 429 ? 0 : (retryAfterMs(response.headers.get('retry-after')) ?? backoffDelay(retried, this.backoff));
        retried += 1;
        await discard(response);
        await delay(wait, signal);
        continue;
      }
      throw await BerthError.fromResponse(response);
    }
  }

  private get backoff(): BackoffOptions {
    return this.options.backoff ?? RETRY_BACKOFF;
  }

  /** `/jobs/job-1` for `<base>/jobs/job-1?x=y`: the route the retry policy and token rules are about. */
  private routePath(url: string): string {
    const { pathname } = new URL(url);
    const path = pathname.startsWith(this.basePath) ? pathname.slice(this.basePath.length) : pathname;
    return path === '' ? '/' : path;
  }
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

/** The most useful words of a fetch failure: Node puts the reason (ECONNREFUSED, …) in its cause. */
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === 'string') return `${cause.code}${typeof cause.message === 'string' ? ` (${cause.message})` : ''}`;
  if (cause && typeof cause.message === 'string') return cause.message;
  return error instanceof Error ? error.message : String(error);
}
