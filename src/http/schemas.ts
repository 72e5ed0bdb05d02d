// Response schemas shared by routes, and the helpers routes use to document themselves: what
// /swagger/doc.json shows (and docs/api.md is rendered from) comes from these schemas.
import { Type, type TSchema } from '@sinclair/typebox';
import { errors, type BerthError } from '../errors.js';
import { UsageDateSchema } from '../core/gateway/usage-report-schema.js';

export const ErrorBodySchema = Type.Object(
  { error: Type.String(), status: Type.Literal('error') },
  { $id: 'ErrorBody', description: 'Every error: a message saying what was wrong, and status "error".' },
);

/**
 * The error responses of a route. A number is a status described only by its general meaning; an error
 * built from the catalogue with placeholders (`errors.sessionNotFound('<id>')`) is a message this route
 * answers with, listed under its status, so the reference quotes the catalogue's own texts.
 */
export function errorResponses(...cases: readonly (number | BerthError)[]): Record<number, TSchema> {
  const messages = new Map<number, string[]>();
  for (const item of cases) {
    const status = typeof item === 'number' ? item : item.status;
    const texts = messages.get(status) ?? [];
    if (typeof item !== 'number' && !texts.includes(item.message)) texts.push(item.message);
    messages.set(status, texts);
  }
  return Object.fromEntries(
    [...messages]
      .sort(([a], [b]) => a - b)
      .map(([status, texts]) => [
        status,
        texts.length === 0
          ? Type.Ref('ErrorBody')
          : Type.Ref('ErrorBody', { description: `Messages: ${texts.map((text) => `\`${text}\``).join('; ')}.` }),
      ]),
  );
}

/** The schema with one example value, shown in /swagger/doc.json and docs/api.md (and checked against the schema there). */
export function withExample<T extends TSchema>(schema: T, example: unknown): T {
  return { ...schema, examples: [example] };
}

/** How a request that starts a run (or an agent) can be refused before its container starts. */
export const RUN_REFUSALS: readonly (number | BerthError)[] = [
  400,
  errors.imageNotAllowed('<image>'),
  errors.imageNotFound('<image>'),
  errors.muslImage('<image>'),
  errors.noGlibcImage('<image>'),
  errors.secretNotFound('<VARIABLE>', '<secret>'),
  401,
  errors.sessionNotFound('<session_id>'),
  errors.sessionBusy('<session_id>'),
  errors.workspaceNotFound('<workspace>'),
  errors.workspaceBusy('<workspace>'),
  413,
  429,
  // A model budget is spent: the caller's daily limit before any container starts, or, once the run is
  // under way, its max_budget_usd or that daily limit at the gateway (the run ends with it).
  errors.budgetExceeded('<the limit, its value and what was used>'),
  errors.engineNotConfigured('<reason>'),
  errors.runtimeUnavailable('<reason>'),
];

/** Refusals of a request whose container must start now (jobs wait for a slot instead). */
export const SLOT_REFUSALS: readonly BerthError[] = [errors.tooManyContainers('<limit>'), errors.atCapacity('<limit>')];

/** How a run that started can fail. */
export const RUN_FAILURES: readonly BerthError[] = [
  errors.runFailed('engine failed: <the engine\'s error>'),
  errors.runTimeout('<container.timeout>'),
  errors.runOom('<container.memory>'),
];

export const EXAMPLE_SESSION_ID = '3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55';

export const EXAMPLE_RUN_REQUEST = {
  prompt: 'Summarise README.md in one sentence',
  workdir: '/work/project',
  engine: { model: 'sonnet', max_turns: 5 },
  container: { volumes: ['/srv/projects/demo:/work/project:ro'], timeout: '10m', memory: '1g' },
};

export const EXAMPLE_RUN_RESPONSE = {
  id: 'run-8d2f4b6a-1c3e-4f5a-9b7d-0e2c4a6f8b1d',
  status: 'completed',
  output: 'Berth runs the Claude Code CLI in rootless Podman containers and returns its output.',
  session_id: EXAMPLE_SESSION_ID,
  usage: {
    token_usage: { input_tokens: 2410, output_tokens: 38, cache_creation_input_tokens: 0, cache_read_input_tokens: 1920 },
    estimated_cost_usd: 0.0084,
  },
};

export const UsageQuerySchema = Type.Object(
  {
    from: Type.Optional({ ...UsageDateSchema, description: 'First UTC day (YYYY-MM-DD); default 6 days before `to`' }),
    to: Type.Optional({ ...UsageDateSchema, description: 'Last UTC day (YYYY-MM-DD), included; default today. At most 92 days from `from`' }),
  },
  { additionalProperties: false },
);

export const EXAMPLE_USAGE_REPORT = {
  caller: 'ci',
  from: '2026-11-25',
  to: '2026-11-26',
  limits: { usd_per_day: 5, tokens_per_day: null },
  today: { date: '2026-11-26', requests: 2, tokens: 8398, cost_usd: 0.012874 },
  total: { requests: 3, input_tokens: 6210, output_tokens: 412, cache_creation_input_tokens: 1024, cache_read_input_tokens: 5120, cost_usd: 0.032554, refused: 1 },
  days: [
    { date: '2026-11-25', requests: 1, input_tokens: 2410, output_tokens: 38, cache_creation_input_tokens: 0, cache_read_input_tokens: 1920, cost_usd: 0.01968, refused: 0 },
    { date: '2026-11-26', requests: 2, input_tokens: 3800, output_tokens: 374, cache_creation_input_tokens: 1024, cache_read_input_tokens: 3200, cost_usd: 0.012874, refused: 1 },
  ],
  runs: [
    {
      run_id: 'run-8d2f4b6a-1c3e-4f5a-9b7d-0e2c4a6f8b1d',
      session_id: EXAMPLE_SESSION_ID,
      first_request_at: '2026-11-26T09:12:03.120Z',
      last_request_at: '2026-11-26T09:12:41.877Z',
      requests: 2, input_tokens: 3800, output_tokens: 374, cache_creation_input_tokens: 1024, cache_read_input_tokens: 3200, cost_usd: 0.012874, refused: 1,
      refusal: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.012874 USD used',
    },
  ],
};

export const EXAMPLE_RUN_USAGE_REPORT = {
  run_id: 'run-8d2f4b6a-1c3e-4f5a-9b7d-0e2c4a6f8b1d',
  session_id: EXAMPLE_SESSION_ID,
  first_request_at: '2026-11-26T09:12:03.120Z',
  last_request_at: '2026-11-26T09:12:41.877Z',
  totals: { requests: 2, input_tokens: 3800, output_tokens: 374, cache_creation_input_tokens: 1024, cache_read_input_tokens: 3200, cost_usd: 0.012874, refused: 1 },
  refusal: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.012874 USD used',
  requests: [
    { at: '2026-11-26T09:12:03.120Z', model: 'claude-sonnet-4-5', status: 200, input_tokens: 3800, output_tokens: 374, cache_creation_input_tokens: 1024, cache_read_input_tokens: 3200, cost_usd: 0.012874, overhead_ms: 0.8 },
    { at: '2026-11-26T09:12:41.877Z', model: 'claude-sonnet-4-5', status: 403, input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cost_usd: 0, refusal: 'this run\'s max_budget_usd (0.01 USD) is spent: 0.012874 USD used' },
  ],
  egress: [
    { at: '2026-11-26T09:12:20.004Z', method: 'CONNECT', host: 'pypi.org', port: 443, decision: 'allowed' },
    { at: '2026-11-26T09:12:22.310Z', method: 'CONNECT', host: 'example.com', port: 443, decision: 'refused_host', reason: 'example.com is not in container.network.allow' },
  ],
};
