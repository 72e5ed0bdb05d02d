// Which failed requests the SDK sends again on its own. The rule is about one thing: can the failed
// attempt have started work on the server? Sending it again must never run a prompt twice.
//
// - Safe to repeat (GET, DELETE, POST /auth/*, POST /images/pull: reading, cancelling, deleting, token
//   calls and pulling give the same result when repeated): retried on 429, 503 and network errors.
// - POST /run/async, POST /agents, POST /agents/:id/send, GET /run/stream (each starts work): retried on
//   429 and 503 only. Berth answers those statuses for these routes before it queues, spawns, sends or
//   starts anything (rate limit, containers per caller, server at capacity, agent still starting,
//   shutting down, Podman or engine unavailable); a later failure of a stream arrives as its `error`
//   frame, not as a status. A network error may have hit a request the server had already accepted,
//   so it is never retried.
// - POST /run: retried on 429 only. Besides its refusals, a sync run can end in 503 after it started
//   (the service stopped it while shutting down), and a retry would run the prompt again.
// Anything else (unknown routes, other methods) is not retried.

export interface RetryPolicy {
  /** Statuses after which the request is sent again. */
  readonly statuses: ReadonlySet<number>;
  /** Whether a request that got no answer is sent again. */
  readonly networkErrors: boolean;
}

const REPEATABLE: RetryPolicy = { statuses: new Set([429, 503]), networkErrors: true };
const REFUSED_BEFORE_WORK: RetryPolicy = { statuses: new Set([429, 503]), networkErrors: false };
const RATE_LIMITED_ONLY: RetryPolicy = { statuses: new Set([429]), networkErrors: false };
const NEVER: RetryPolicy = { statuses: new Set(), networkErrors: false };

/** The policy of a request, from its method and its path relative to Berth's base URL. */
export function retryPolicy(method: string, path: string): RetryPolicy {
  const verb = method.toUpperCase();
  if (verb === 'GET' && path === '/run/stream') return REFUSED_BEFORE_WORK;
  if (verb === 'GET' || verb === 'HEAD' || verb === 'DELETE') return REPEATABLE;
  if (verb !== 'POST') return NEVER;
  if (path.startsWith('/auth/') || path === '/images/pull') return REPEATABLE;
  if (path === '/run') return RATE_LIMITED_ONLY;
  if (path === '/run/async' || path === '/agents' || /^\/agents\/[^/]+\/send$/.test(path)) return REFUSED_BEFORE_WORK;
  return NEVER;
}
