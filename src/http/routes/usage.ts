// GET /usage and GET /usage/runs/:run_id: the caller's model usage as Berth's model gateway recorded it, by
// UTC day and by run, and one run's model requests and egress decisions. Owner-scoped like every resource:
// only the caller's own records, another caller's run is 404. The sums come from core/gateway/usage-report.ts.
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../errors.js';
import type { UsageReport } from '../../core/gateway/usage-report.js';
import { requestCaller } from '../caller.js';
import { RunUsageReportSchema, UsageReportSchema } from '../../core/gateway/usage-report-schema.js';
import { EXAMPLE_RUN_USAGE_REPORT, EXAMPLE_USAGE_REPORT, UsageQuerySchema, errorResponses, withExample } from '../schemas.js';

const RunParamsSchema = Type.Object({ run_id: Type.String({ description: 'The run\'s id (run-…), as in GET /usage\'s runs' }) });

export function registerUsageRoutes(app: FastifyInstance, deps: { usage: UsageReport }): void {
  const { usage } = deps;

  app.get<{ Querystring: Static<typeof UsageQuerySchema> }>(
    '/usage',
    {
      schema: {
        tags: ['usage'],
        summary: 'The caller\'s model usage by UTC day and by run, and its daily limits',
        description:
          'What Berth\'s model gateway recorded for the caller\'s model requests: tokens and estimated cost per UTC day (default: the last 7 days, today included; at most 92 days) and per run. Budgets are enforced by the gateway before each model request: a run\'s `max_budget_usd`, and the operator\'s SERVICE_CALLER_BUDGET_USD_PER_DAY and SERVICE_CALLER_TOKENS_PER_DAY, which are checked against `today` and reset at 00:00 UTC.',
        querystring: UsageQuerySchema,
        response: {
          200: withExample(UsageReportSchema, EXAMPLE_USAGE_REPORT),
          ...errorResponses(errors.badRequest('from: "<from>" is not a date; use YYYY-MM-DD (UTC)'), errors.badRequest('from: <from> to <to> spans <n> days; at most 92'), 401, 429),
        },
      },
    },
    async (request) => usage.report(requestCaller(request).owner, request.query),
  );

  app.get<{ Params: Static<typeof RunParamsSchema> }>(
    '/usage/runs/:run_id',
    {
      schema: {
        tags: ['usage'],
        summary: 'One run\'s model requests and egress decisions',
        description: 'The run\'s totals, its latest 500 model requests and its latest 500 egress decisions (kept 30 days), as the gateway and the egress proxy recorded them. Another caller\'s run is not found.',
        params: RunParamsSchema,
        response: {
          200: withExample(RunUsageReportSchema, EXAMPLE_RUN_USAGE_REPORT),
          ...errorResponses(401, errors.notFound('run <run_id>'), 429),
        },
      },
    },
    async (request) => usage.run(requestCaller(request).owner, request.params.run_id),
  );
}
