// What GET /usage and GET /usage/runs/:run_id answer, as JSON schemas: Fastify serialises the answers with
// them and the OpenAPI document shows them, and the report's types (usage-report.ts) are their static
// types, so the answer, its documentation and its clients' view cannot drift apart.
import { Type, type Static } from '@sinclair/typebox';
import { EGRESS_DECISIONS } from './gateway-types.js';

/** Sums over model requests recorded by Berth's model gateway (GET /usage, GET /usage/runs/{run_id}). */
const usageCounters = {
  requests: Type.Integer({ description: 'Model requests the gateway saw, refused ones included' }),
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  cache_creation_input_tokens: Type.Integer(),
  cache_read_input_tokens: Type.Integer(),
  cost_usd: Type.Number({ description: 'Estimated from the price table, to the micro-dollar; an estimate, not a bill' }),
  refused: Type.Integer({ description: 'Requests refused because a budget was spent' }),
};
export const UsageDateSchema = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'UTC date, YYYY-MM-DD' });
const runIdentity = {
  run_id: Type.String({ description: 'The run (run-…), the agent\'s run, or a workspace clone\'s container' }),
  session_id: Type.Optional(Type.String({ format: 'uuid' })),
  agent_id: Type.Optional(Type.String({ description: 'Set for an agent\'s requests (agent-…)' })),
  first_request_at: Type.String({ format: 'date-time', description: 'The run\'s first record (model request or egress decision) in the period' }),
  last_request_at: Type.String({ format: 'date-time' }),
};
const refusal = Type.Optional(Type.String({ description: 'The latest budget refusal, naming the limit: the text the run ended with' }));

export const UsageReportSchema = Type.Object({
  caller: Type.String({ description: 'The caller (its token\'s `sub`; empty with authentication off): only its own records are counted' }),
  from: UsageDateSchema,
  to: UsageDateSchema,
  limits: Type.Object(
    {
      usd_per_day: Type.Union([Type.Number(), Type.Null()], { description: 'SERVICE_CALLER_BUDGET_USD_PER_DAY; null: none' }),
      tokens_per_day: Type.Union([Type.Integer(), Type.Null()], { description: 'SERVICE_CALLER_TOKENS_PER_DAY (every kind of token together); null: none' }),
    },
    { description: 'The operator\'s daily limits per caller; a day is a UTC day and resets at 00:00 UTC' },
  ),
  today: Type.Object(
    {
      date: UsageDateSchema,
      requests: Type.Integer(),
      tokens: Type.Integer({ description: 'Every kind of token together: what SERVICE_CALLER_TOKENS_PER_DAY counts' }),
      cost_usd: Type.Number(),
    },
    { description: 'Today\'s usage (UTC), whatever the period asked for: what the daily limits are checked against' },
  ),
  total: Type.Object(usageCounters, { description: 'The period\'s days added up' }),
  days: Type.Array(Type.Object({ date: UsageDateSchema, ...usageCounters }), { description: 'Every day of the period, oldest first (zeros on a day without requests)' }),
  runs: Type.Array(Type.Object({ ...runIdentity, ...usageCounters, refusal }), {
    description: 'Runs with model requests in the period, counting those requests; the latest 500, latest first',
  }),
});

export const RunUsageReportSchema = Type.Object({
  ...runIdentity,
  totals: Type.Object(usageCounters, { description: 'Every model request of the run' }),
  refusal,
  requests: Type.Array(
    Type.Object({
      at: Type.String({ format: 'date-time' }),
      model: Type.String(),
      status: Type.Integer({ description: 'The HTTP status the engine got: the model\'s, or 403 when the gateway refused the request' }),
      input_tokens: Type.Integer(),
      output_tokens: Type.Integer(),
      cache_creation_input_tokens: Type.Integer(),
      cache_read_input_tokens: Type.Integer(),
      cost_usd: Type.Number(),
      overhead_ms: Type.Optional(Type.Number({ description: 'Time the gateway added before the first byte of the answer' })),
      refusal: Type.Optional(Type.String({ description: 'Why the gateway refused it: the budget that was spent' })),
    }),
    { description: 'The run\'s latest 500 model requests, oldest first' },
  ),
  egress: Type.Array(
    Type.Object({
      at: Type.String({ format: 'date-time' }),
      method: Type.Union([Type.Literal('CONNECT'), Type.Literal('HTTP')], { description: 'CONNECT: an HTTPS tunnel; HTTP: a plain request through the proxy' }),
      host: Type.String(),
      port: Type.Integer(),
      decision: Type.Union(
        EGRESS_DECISIONS.map((value) => Type.Literal(value)),
        { description: 'What the egress proxy decided (berth_egress_requests_total{decision})' },
      ),
      reason: Type.Optional(Type.String({ description: 'Why, for a refusal or a failure: the text the client got' })),
    }),
    { description: 'The run\'s latest 500 egress decisions, oldest first (kept 30 days)' },
  ),
});

export type UsageReportView = Static<typeof UsageReportSchema>;
export type RunReportView = Static<typeof RunUsageReportSchema>;
/** The sums of a day, a run or a period: requests, tokens by kind, cost and refusals. */
export type UsageCounters = UsageReportView['total'];
export type RunSummaryView = UsageReportView['runs'][number];
export type ModelRequestView = RunReportView['requests'][number];
export type EgressDecisionView = RunReportView['egress'][number];
