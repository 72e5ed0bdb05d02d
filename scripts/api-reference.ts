// Renders docs/api.md from Berth's OpenAPI document, which Fastify builds from the route schemas: the
// reference can then never disagree with what the service validates and answers.
//   npx tsx scripts/api-reference.ts http://127.0.0.1:8080/swagger/doc.json > docs/api.md
// test/integration/api-reference.test.ts fails when the committed docs/api.md is stale, and checks that
// every example in it is valid against its schema.
import { errors } from '../src/errors.js';
import { OPEN_ROUTES } from '../src/http/plugins/auth.js';

export type Schema = {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  format?: string;
  example?: unknown;
  nullable?: boolean;
  $ref?: string;
};
export type Media = { schema?: Schema; example?: unknown };
export type Operation = {
  summary?: string;
  description?: string;
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: Schema; example?: unknown }[];
  requestBody?: { content?: Record<string, Media> };
  responses?: Record<string, { description?: string; content?: Record<string, Media> }>;
};
export type OpenApi = {
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
};

const quoted = (error: { message: string }) => `\`${error.message}\``;

/** What each error status means across the API; an endpoint's own messages follow it. */
const STATUS_MEANING: Record<string, string> = {
  '400': 'The request is invalid; the message names the field and what is wrong.',
  '401': `No valid access token: ${[errors.tokenRequired(), errors.invalidToken(), errors.tokenExpired(), errors.tokenBlacklisted()].map(quoted).join(', ')}.`,
  '404': 'No such resource, or one another caller created.',
  '409': 'Conflict with the current state of the resource.',
  '410': 'The agent has exited.',
  '413': 'The body is over SERVICE_MAX_BODY_BYTES (`request body is too large (SERVICE_MAX_BODY_BYTES)`), or the prompt over SERVICE_MAX_PROMPT_BYTES.',
  '429': `The rate limit (${quoted(errors.rateLimited())}), or a per-caller limit named in the message.`,
  '500': 'The run failed after its container started; the container was removed.',
  '502': 'The image registry failed.',
  '503': `Podman or the token blacklist is unavailable: ${quoted(errors.runtimeUnavailable('<reason>'))}, ${quoted(errors.blacklistUnavailable('<reason>'))}.`,
};

/** Statuses whose general meaning stays beside an endpoint's own messages: they can come from any request. */
const ALWAYS_GENERAL = new Set(['400', '413', '429']);

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const sentence = (text: string) => (/[.!?`]$/.test(text.trim()) ? text.trim() : `${text.trim()}.`);

function typeOf(schema: Schema | undefined): string {
  if (!schema) return 'any';
  if (schema.nullable) return `${typeOf({ ...schema, nullable: false })} or \`null\``;
  if (schema.const !== undefined) return `\`${JSON.stringify(schema.const)}\``;
  if (schema.enum) return schema.enum.map((v) => `\`${JSON.stringify(v)}\``).join(' or ');
  if (schema.anyOf) return [...new Set(schema.anyOf.map(typeOf))].join(' or ');
  if (schema.$ref) return schema.$ref.split('/').pop() ?? 'object';
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return 'any';
  return types
    .map((type) => {
      if (type === 'array') return `array of ${typeOf(schema.items)}`;
      return schema.format && type === 'string' ? `string (${schema.format})` : type;
    })
    .join(' or ');
}

/** The object inside a schema, if any: itself, the items of an array, or the object branch of a union. */
function objectOf(schema: Schema | undefined): { schema: Schema; suffix: string } | undefined {
  if (!schema) return undefined;
  if (schema.properties && Object.keys(schema.properties).length > 0) return { schema, suffix: '' };
  if (schema.items) {
    const inner = objectOf(schema.items);
    return inner && { schema: inner.schema, suffix: `[]${inner.suffix}` };
  }
  for (const branch of schema.anyOf ?? []) {
    const inner = objectOf(branch);
    if (inner) return inner;
  }
  return undefined;
}

function notes(field: Schema): string {
  const parts = [field.description ?? ''];
  if (!field.description) for (const branch of field.anyOf ?? []) if (branch.description) parts.push(branch.description);
  if (field.default !== undefined && !/default/i.test(parts.join(' '))) parts.push(`Default ${JSON.stringify(field.default)}.`);
  return parts.filter(Boolean).map(sentence).join(' ');
}

/** Objects already listed field by field, and where: a later one refers there instead of repeating them. */
type Listed = Map<string, string>;

/** One row per field, nested fields as `engine.model` or `messages[].role`. */
function fieldRows(schema: Schema, withRequired: boolean, listed: Listed | undefined, where: string, prefix = ''): string[] {
  const rows: string[] = [];
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}${name}`;
    const required = schema.required?.includes(name) ? 'yes' : '';
    const inner = objectOf(field);
    const key = inner && JSON.stringify(inner.schema);
    const seenAt = key === undefined ? undefined : listed?.get(key);
    const meaning = [notes(field), seenAt ? `Fields as in ${seenAt}.` : ''].filter(Boolean).join(' ');
    rows.push(
      withRequired
        ? `| \`${path}\` | ${cell(typeOf(field))} | ${required} | ${cell(meaning)} |`
        : `| \`${path}\` | ${cell(typeOf(field))} | ${cell(`${required ? '' : 'Optional. '}${meaning}`)} |`,
    );
    if (!inner || seenAt) continue;
    if (key !== undefined) listed?.set(key, `\`${path}\` of ${where}`);
    rows.push(...fieldRows(inner.schema, withRequired, listed, where, `${path}${inner.suffix}.`));
  }
  return rows;
}

function table(header: string, rows: string[]): string[] {
  return rows.length === 0 ? [] : [header, header.replace(/[^|]+/g, '---'), ...rows, ''];
}

function exampleBlock(title: string, example: unknown, language = 'json'): string[] {
  if (example === undefined) return [];
  const text = typeof example === 'string' && language !== 'json' ? example.trimEnd() : JSON.stringify(example, null, 2);
  return [title, '', `\`\`\`${language}`, text, '```', ''];
}

/** How a caller authenticates: the gate's own list of open routes decides. */
function authOf(method: string, path: string): string {
  const route = `${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`;
  if (route === 'POST /auth/token') return 'an API token: `Authorization: Bearer <API token>` (one of SERVICE_API_TOKENS)';
  if (OPEN_ROUTES.has(route)) return 'none (open)';
  return 'access token: `Authorization: Bearer <access token>`';
}

function exampleUrl(method: string, path: string, operation: Operation): string | undefined {
  const query = (operation.parameters ?? []).filter((p) => p.in === 'query' && p.example !== undefined);
  if (query.length === 0) return undefined;
  const search = new URLSearchParams(query.map((p) => [p.name, String(p.example)]));
  return `${method.toUpperCase()} ${path}?${search.toString()}`;
}

function renderOperation(method: string, path: string, operation: Operation, genericError: string | undefined, listed: Listed): string[] {
  const title = `${method.toUpperCase()} ${path}`;
  const out: string[] = [`## ${title}`, ''];
  if (operation.summary) out.push(sentence(operation.summary), '');
  out.push(`Authentication: ${authOf(method, path)}.`, '');
  if (operation.description && operation.description !== operation.summary) out.push(sentence(operation.description), '');

  const parameters = (operation.parameters ?? []).map(
    (p) => `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required ? 'yes' : ''} | ${cell(notes({ ...p.schema, description: p.description ?? p.schema?.description }))} |`,
  );
  out.push(...table('| Parameter | In | Type | Required | Meaning |', parameters));
  const url = exampleUrl(method, path, operation);
  if (url) out.push('Example request:', '', '```http', url, '```', '');

  const body = operation.requestBody?.content?.['application/json'];
  if (body?.schema) {
    const seenAt = listed.get(JSON.stringify(body.schema));
    if (seenAt) out.push(`Request body: the fields of ${seenAt}.`, '');
    else {
      listed.set(JSON.stringify(body.schema), `the request body of [${title}](#${anchor(title)})`);
      out.push('Request body:', '', ...table('| Field | Type | Required | Meaning |', fieldRows(body.schema, true, listed, `[${title}](#${anchor(title)})`)));
    }
    out.push(...exampleBlock('Example request body:', body.example));
  }

  const errorLines: string[] = [];
  for (const [status, response] of Object.entries(operation.responses ?? {})) {
    if (/^[45]/.test(status)) {
      let own = response.description && response.description !== genericError ? sentence(response.description) : '';
      const general = own === '' || ALWAYS_GENERAL.has(status) ? (STATUS_MEANING[status] ?? '') : '';
      if (general === '') own = own.replace(/^Messages: /, '');
      errorLines.push(`- **${status}** ${cell(`${general} ${own}`.trim())}`);
      continue;
    }
    const [contentType, media] = Object.entries(response.content ?? {})[0] ?? [];
    const said = response.description === operation.description ? 'as described above' : response.description && response.description !== 'Default Response' ? response.description : 'success';
    out.push(`Response **${status}**${contentType && contentType !== 'application/json' ? ` (\`${contentType}\`)` : ''}: ${sentence(said)}`, '');
    if (media?.schema && contentType === 'application/json') out.push(...table('| Field | Type | Meaning |', fieldRows(media.schema, false, undefined, title)));
    out.push(...exampleBlock('Example response:', media?.example, contentType === 'application/json' ? 'json' : 'text'));
  }
  if (errorLines.length > 0) out.push('Errors:', '', ...errorLines, '');
  return out;
}

export function renderApiReference(doc: OpenApi): string {
  const genericError = doc.components?.schemas?.['ErrorBody']?.description;
  const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })));
  const out: string[] = [
    `# ${doc.info.title} API reference (${doc.info.version})`,
    '',
    '<!-- Generated from GET /swagger/doc.json by scripts/api-reference.ts; do not edit by hand. -->',
    '',
    doc.info.description ?? '',
    '',
    'Each endpoint below lists its parameters, request and response fields, an example, and its error statuses with',
    'the messages it answers. Every error code with its status is in [errors.md](errors.md); the topics have their',
    'own pages: [authentication, rate limits and metrics](auth.md), [jobs, webhooks and streaming](jobs.md),',
    '[sessions](sessions.md), [persistent agents](agents.md), [images](images.md), [workspaces](workspaces.md),',
    '[the model gateway, budgets and egress](egress.md), [the sandbox](security.md).',
    '',
    '## Endpoints',
    '',
    ...table(
      '| Endpoint | Authentication | What it does |',
      operations.map(({ path, method, operation }) => `| [\`${method.toUpperCase()} ${path}\`](#${anchor(`${method} ${path}`)}) | ${cell(authOf(method, path).replace(/:.*/, ''))} | ${cell(operation.summary ?? '')} |`),
    ),
  ];
  const listed: Listed = new Map();
  for (const { path, method, operation } of operations) out.push(...renderOperation(method, path, operation, genericError, listed));
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

/** GitHub's heading anchor: lower case, punctuation other than - and _ dropped, spaces to -. */
function anchor(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const url = process.argv[2] ?? 'http://127.0.0.1:8080/swagger/doc.json';
  const doc = (await (await fetch(url)).json()) as OpenApi;
  process.stdout.write(renderApiReference(doc));
}
