// Every Prometheus metric Berth exports, created on one private Registry per service instance (no global
// default registry, so tests and several instances in one process never collide). Code that records a
// metric receives this object as a dependency; only metrics-server.ts exposes it.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type RunMode = 'sync' | 'async' | 'stream' | 'agent';
export type RunOutcome = 'completed' | 'failed' | 'crashed' | 'cancelled' | 'timeout' | 'oom' | 'rejected';
export type WebhookOutcome = 'delivered' | 'retried' | 'failed';
export type AuthFailureReason =
  | 'token_required'
  | 'invalid_token'
  | 'token_expired'
  | 'token_blacklisted'
  | 'invalid_api_token'
  | 'blacklist_unavailable';

export const RUN_MODES: readonly RunMode[] = ['sync', 'async', 'stream', 'agent'];
export const RUN_OUTCOMES: readonly RunOutcome[] = ['completed', 'failed', 'crashed', 'cancelled', 'timeout', 'oom', 'rejected'];
export const WEBHOOK_OUTCOMES: readonly WebhookOutcome[] = ['delivered', 'retried', 'failed'];
export const AUTH_FAILURE_REASONS: readonly AuthFailureReason[] = [
  'token_required', 'invalid_token', 'token_expired', 'token_blacklisted', 'invalid_api_token', 'blacklist_unavailable',
];

export interface Metrics {
  readonly registry: Registry;
  /** Labels: route (the route pattern, never the raw URL), method, status. */
  readonly httpRequests: Counter<'route' | 'method' | 'status'>;
  /** Seconds. Labels: route, method. */
  readonly httpDuration: Histogram<'route' | 'method'>;
  /** Labels: mode (RunMode), outcome (RunOutcome). */
  readonly runs: Counter<'mode' | 'outcome'>;
  /** Seconds. Label: mode. */
  readonly runDuration: Histogram<'mode'>;
  readonly runPhaseDuration: Histogram<'phase'>;
  readonly containersRunning: Gauge;
  /** Compose stacks that exist (container.environment). */
  readonly composeStacks: Gauge;
  /** Label pool: run or agent (core/pool/engine-pool.ts PoolKind), on every pool metric. */
  readonly poolReady: Gauge<'pool'>;
  readonly poolHits: Counter<'pool'>;
  /** Label: reason (core/pool/pool-match.ts MissReason). */
  readonly poolMisses: Counter<'pool' | 'reason'>;
  readonly poolClaim: Histogram<'pool'>;
  readonly poolRefill: Histogram<'pool'>;
  /** Label: status (a job status). */
  readonly jobs: Gauge<'status'>;
  /** Label: status (an agent status). */
  readonly agents: Gauge<'status'>;
  readonly sseSubscribers: Gauge;
  /** Label: outcome (WebhookOutcome). */
  readonly webhookDeliveries: Counter<'outcome'>;
  /** Label: reason (AuthFailureReason). */
  readonly authFailures: Counter<'reason'>;
  readonly rateLimited: Counter;
}

const PREFIX = 'berth_';

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
  const registers = [registry];

  const metrics: Metrics = {
    registry,
    httpRequests: new Counter({
      name: `${PREFIX}http_requests_total`,
      help: 'HTTP requests answered by the API listener, by route pattern, method and status code.',
      labelNames: ['route', 'method', 'status'],
      registers,
    }),
    httpDuration: new Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help: 'Time from receiving an API request to finishing its response, by route pattern and method.',
      labelNames: ['route', 'method'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    runs: new Counter({
      name: `${PREFIX}runs_total`,
      help: 'Engine runs by mode (sync, async, stream, agent) and outcome.',
      labelNames: ['mode', 'outcome'],
      registers,
    }),
    runDuration: new Histogram({
      name: `${PREFIX}run_duration_seconds`,
      help: 'Wall-clock duration of engine runs, container start to removal, by mode.',
      labelNames: ['mode'],
      // Runs take from seconds to hours (container.timeout allows up to SERVICE_AGENT_MAX_TIMEOUT).
      buckets: [1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400],
      registers,
    }),
    runPhaseDuration: new Histogram({
      name: `${PREFIX}run_phase_duration_seconds`,
      help: 'Time runs spend in each phase (validate, image_check, claim, session, queue, compose_build, compose_start, compose_healthy, create, start, first_output, engine_exit, remove).',
      labelNames: ['phase'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
      registers,
    }),
    poolReady: new Gauge({
      name: `${PREFIX}pool_ready`,
      help: 'Pre-started engines ready to be claimed, by pool: run (SERVICE_POOL_SIZE) or agent (SERVICE_AGENT_POOL_SIZE).',
      labelNames: ['pool'],
      registers,
    }),
    poolHits: new Counter({
      name: `${PREFIX}pool_hits_total`,
      help: 'Runs and agents that took a pre-started engine.',
      labelNames: ['pool'],
      registers,
    }),
    poolMisses: new Counter({
      name: `${PREFIX}pool_misses_total`,
      help: 'Runs and agents that did not take a pre-started engine, by reason (session, image, workdir, volumes, secrets, limits, lifecycle, environment, engine_options, workspace, empty, stale).',
      labelNames: ['pool', 'reason'],
      registers,
    }),
    poolClaim: new Histogram({
      name: `${PREFIX}pool_claim_seconds`,
      help: 'Time to hand a pre-started engine to a run or agent.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      labelNames: ['pool'],
      registers,
    }),
    poolRefill: new Histogram({
      name: `${PREFIX}pool_refill_seconds`,
      help: 'Time to start one pre-started engine (an agent\'s until it answered its handshake).',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      labelNames: ['pool'],
      registers,
    }),
    composeStacks: new Gauge({
      name: `${PREFIX}compose_stacks`,
      help: 'Compose stacks that exist (one per session with an environment); their bring-up phases are in berth_run_phase_duration_seconds.',
      registers,
    }),
    containersRunning: new Gauge({
      name: `${PREFIX}containers_running`,
      help: 'Agent containers currently running.',
      registers,
    }),
    jobs: new Gauge({
      name: `${PREFIX}jobs`,
      help: 'Async jobs known to the job store, by status.',
      labelNames: ['status'],
      registers,
    }),
    agents: new Gauge({
      name: `${PREFIX}agents`,
      help: 'Persistent agents in the registry, by status.',
      labelNames: ['status'],
      registers,
    }),
    sseSubscribers: new Gauge({
      name: `${PREFIX}sse_subscribers`,
      help: 'Open Server-Sent Events subscriptions (run streams and agent streams).',
      registers,
    }),
    webhookDeliveries: new Counter({
      name: `${PREFIX}webhook_deliveries_total`,
      help: 'Webhook delivery attempts by outcome (delivered, retried, failed).',
      labelNames: ['outcome'],
      registers,
    }),
    authFailures: new Counter({
      name: `${PREFIX}auth_failures_total`,
      help: 'Requests refused by authentication, by reason.',
      labelNames: ['reason'],
      registers,
    }),
    rateLimited: new Counter({
      name: `${PREFIX}rate_limited_total`,
      help: 'Requests refused with 429 by the per-client rate limiter.',
      registers,
    }),
  };

  // Series with a known, small label set start at zero so rate() and absence alerts work from the first scrape.
  for (const mode of RUN_MODES) for (const outcome of RUN_OUTCOMES) metrics.runs.labels(mode, outcome).inc(0);
  for (const outcome of WEBHOOK_OUTCOMES) metrics.webhookDeliveries.labels(outcome).inc(0);
  for (const reason of AUTH_FAILURE_REASONS) metrics.authFailures.labels(reason).inc(0);
  return metrics;
}
