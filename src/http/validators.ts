// Two JSON-schema validators: request bodies are checked strictly (no type coercion, unknown fields are
// errors, never silently dropped), while query strings and path parameters arrive as text and are coerced
// to the declared types (`?limit=5` → 5).
import { Ajv } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = new Ajv({ allErrors: false, coerceTypes: false, removeAdditional: false, useDefaults: false, strict: false });
  const coercing = new Ajv({ allErrors: false, coerceTypes: true, removeAdditional: false, useDefaults: true, strict: false });
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : coercing;
    return ajv.compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}
