// The answer of a completed run (POST /run, a job's result, the stream's result frame) as a JSON schema:
// Fastify serialises the answer with it and the OpenAPI document shows it, and RunResult, what the run
// service returns, is its static type, so the two cannot drift apart.
import { Type, type Static } from '@sinclair/typebox';

export const TokenUsageSchema = Type.Object(
  {
    input_tokens: Type.Integer(),
    output_tokens: Type.Integer(),
    cache_creation_input_tokens: Type.Integer(),
    cache_read_input_tokens: Type.Integer(),
  },
  { description: 'Tokens of the whole session so far, read from the engine\'s session record.' },
);

export const RunUsageSchema = Type.Object(
  {
    token_usage: TokenUsageSchema,
    estimated_cost_usd: Type.Number({ description: 'From a per-model price table; an estimate, not a bill.' }),
  },
  { description: 'Omitted until an assistant message has reported usage.' },
);

export const RunResultSchema = Type.Object({
  id: Type.String({ description: 'Run id, prefix run-' }),
  status: Type.Literal('completed', { description: 'Always completed: a run that fails answers with an error status instead.' }),
  output: Type.String({ description: 'The engine\'s final answer (with output_format stream-json: its raw event lines).' }),
  session_id: Type.String({ format: 'uuid', description: 'The run\'s session; pass it with resume or fork_session to continue.' }),
  usage: Type.Optional(RunUsageSchema),
  structured_output: Type.Optional(
    Type.Unknown({ description: 'With output_format json and a json_schema: the JSON value the engine returned, matching the schema.' }),
  ),
});

export type RunUsage = Static<typeof RunUsageSchema>;
export type RunResult = Static<typeof RunResultSchema>;
