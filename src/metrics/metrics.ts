// Every Prometheus metric Berth exports, created on one private Registry per service instance (no global
// default registry, so tests and several instances in one process never collide). Code that records a
// metric receives this object as a dependency; only metrics-server.ts exposes it.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EGRESS_DECISIONS } from '../core/gateway/gateway-types.js';
import { RUN_MODES, RUN_OUTCOMES } from '../core/runs/run-labels.js';

export type WebhookOutcome = 'delivered' | 'retried' | 'failed';
export type AuthFailureReason =
  | 'token_required'
  | 'invalid_token'
  | 'token_expired'
  | 'token_blacklisted'
  | 'invalid_api_token'
  | 'blacklist_unavailable';

/** What became of a request to the model gateway (src/gateway/). */
export type GatewayOutcome = 'forwarded' | 'refused_credential' | 'refused_budget' | 'budget_unavailable' | 'upstream_error';
/** The token counts of a model answer, as the Messages API names them (without the `_tokens` suffixes). */
export type ModelTokenKind = 'input' | 'output' | 'cache_creation' | 'cache_read';

export const WEBHOOK_OUTCOMES: readonly WebhookOutcome[] = ['delivered', 'retried', 'failed'];
export const AUTH_FAILURE_REASONS: readonly AuthFailureReason[] = [
  'token_required', 'invalid_token', 'token_expired', 'token_blacklisted', 'invalid_api_token', 'blacklist_unavailable',
];

export const GATEWAY_OUTCOMES: readonly GatewayOutcome[] = ['forwarded', 'refused_credential', 'refused_budget', 'budget_unavailable', 'upstream_error'];
export const MODEL_TOKEN_KINDS: readonly ModelTokenKind[] = ['input', 'output', 'cache_creation', 'cache_read'];

export interface Metrics {
  readonly registry: Registry;
  /** Labels: route (the route pattern, never the raw URL), method, status. */
  readonly httpRequests: Counter<'route' | 'method' | 'status'>;
  /** Seconds. Labels: route, method. */
  readonly httpDuration: Histogram<'route' | 'method'>;
  /** Labels: mode (core/runs/run-labels.ts RunMode), outcome (RunOutcomeLabel there). */
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
  /** Label: decision (gateway-types.ts EgressDecision): every decision of the egress proxy. */
  readonly egressRequests: Counter<'decision'>;
  /** Label: outcome (GatewayOutcome): every model request that reached the gateway. */
  readonly gatewayRequests: Counter<'outcome'>;
  /** Seconds the gateway adds before the first byte of a model answer reaches the engine. */
  readonly gatewayOverhead: Histogram;
  /** Label: kind (ModelTokenKind): tokens of the model answers forwarded by the gateway. */
  readonly modelTokens: Counter<'kind'>;
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
      help: `Engine runs by mode (${RUN_MODES.join(', ')}) and outcome (${RUN_OUTCOMES.join(', ')}).`,
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
      help: 'Time runs spend in each phase (validate, image_check, claim, session, queue, compose_build, compose_start, compose_healthy, create, start, first_output, result, engine_exit, remove).',
      labelNames: ['phase'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
      registers,
    }),
    poolReady: new Gauge({
      name: `${PREFIX}pool_ready`,
      help: 'Pre-started engines ready to be claimed (warmed up, and their own start-up work over), by pool: run (SERVICE_POOL_SIZE) or agent (SERVICE_AGENT_POOL_SIZE).',
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
    egressRequests: new Counter({
      name: `${PREFIX}egress_requests_total`,
      help: 'Decisions of the egress proxy by decision (allowed, refused_credential, refused_mode, refused_host, refused_address, refused_sni, refused_protocol, failed).',
      labelNames: ['decision'],
      registers,
    }),
    gatewayRequests: new Counter({
      name: `${PREFIX}gateway_requests_total`,
      help: 'Model requests that reached the model gateway, by outcome (forwarded, refused_credential, refused_budget, budget_unavailable, upstream_error).',
      labelNames: ['outcome'],
      registers,
    }),
    gatewayOverhead: new Histogram({
      name: `${PREFIX}gateway_overhead_seconds`,
      help: 'Time the model gateway adds before the first byte of a model answer reaches the engine.',
      // The target is at most 5 ms at the median; the buckets resolve well below and above it.
      buckets: [0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1],
      registers,
    }),
    modelTokens: new Counter({
      name: `${PREFIX}model_tokens_total`,
      help: 'Tokens of the model answers forwarded by the gateway, by kind (input, output, cache_creation, cache_read).',
      labelNames: ['kind'],
      registers,
    }),
  };

  // Series with a known, small label set start at zero so rate() and absence alerts work from the first scrape.
  for (const mode of RUN_MODES) for (const outcome of RUN_OUTCOMES) metrics.runs.labels(mode, outcome).inc(0);
  for (const outcome of WEBHOOK_OUTCOMES) metrics.webhookDeliveries.labels(outcome).inc(0);
  for (const reason of AUTH_FAILURE_REASONS) metrics.authFailures.labels(reason).inc(0);
  for (const decision of EGRESS_DECISIONS) metrics.egressRequests.labels(decision).inc(0);
  for (const outcome of GATEWAY_OUTCOMES) metrics.gatewayRequests.labels(outcome).inc(0);
  for (const kind of MODEL_TOKEN_KINDS) metrics.modelTokens.labels(kind).inc(0);
  return metrics;
}
