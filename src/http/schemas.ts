// Response schemas shared by routes, and the helpers routes use to document themselves: what
// /swagger/doc.json shows (and docs/api.md is rendered from) comes from these schemas.
import { Type, type TSchema } from '@sinclair/typebox';
import { errors, type BerthError } from '../errors.js';

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
  errors.secretNotFound('<VARIABLE>', '<secret>'),
  401,
  errors.sessionNotFound('<session_id>'),
  errors.sessionBusy('<session_id>'),
  errors.workspaceNotFound('<workspace>'),
  errors.workspaceBusy('<workspace>'),
  413,
  429,
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

export const TokenUsageSchema = Type.Object(
  {
    input_tokens: Type.Integer(),
    output_tokens: Type.Integer(),
    cache_creation_input_tokens: Type.Integer(),
    cache_read_input_tokens: Type.Integer(),
  },
  { description: 'Tokens of the whole session so far, read from the engine\'s session record.' },
);

export const UsageSchema = Type.Object(
  {
    token_usage: TokenUsageSchema,
    estimated_cost_usd: Type.Number({ description: 'From a per-model price table; an estimate, not a bill.' }),
  },
  { description: 'Omitted until an assistant message has reported usage.' },
);

export const RunResponseSchema = Type.Object({
  id: Type.String({ description: 'Run id, prefix run-' }),
  status: Type.Literal('completed', { description: 'Always completed: a run that fails answers with an error status instead.' }),
  output: Type.String({ description: 'The engine\'s final answer (with output_format stream-json: its raw event lines).' }),
  session_id: Type.String({ format: 'uuid', description: 'The run\'s session; pass it with resume or fork_session to continue.' }),
  usage: Type.Optional(UsageSchema),
  structured_output: Type.Optional(
    Type.Unknown({ description: 'With output_format json and a json_schema: the JSON value the engine returned, matching the schema.' }),
  ),
});

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
