// Response schemas shared by routes; they document the API in /swagger/doc.json.
import { Type } from '@sinclair/typebox';

export const ErrorBodySchema = Type.Object(
  { error: Type.String(), status: Type.Literal('error') },
  { $id: 'ErrorBody', description: 'Every error: a message saying what was wrong, and status "error".' },
);

export const errorResponses = (...codes: number[]) =>
  Object.fromEntries(codes.map((code) => [code, Type.Ref('ErrorBody')]));

export const TokenUsageSchema = Type.Object({
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  cache_creation_input_tokens: Type.Integer(),
  cache_read_input_tokens: Type.Integer(),
});

export const UsageSchema = Type.Object({
  token_usage: TokenUsageSchema,
  estimated_cost_usd: Type.Number(),
});

export const RunResponseSchema = Type.Object({
  id: Type.String({ description: 'Run id, prefix run-' }),
  status: Type.Literal('completed'),
  output: Type.String(),
  session_id: Type.String({ format: 'uuid' }),
  usage: Type.Optional(UsageSchema),
  structured_output: Type.Optional(Type.Unknown()),
});
