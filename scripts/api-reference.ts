// Renders docs/api.md from Berth's OpenAPI document, which Fastify builds from the route schemas: the
// reference can then never disagree with what the service validates and answers.
//   npx tsx scripts/api-reference.ts http://127.0.0.1:8080/swagger/doc.json > docs/api.md
// test/integration/api-reference.test.ts fails when the committed docs/api.md is stale.

type Schema = {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
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
  $ref?: string;
};
type Operation = {
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: Schema }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
};
type OpenApi = { info: { title: string; version: string; description?: string }; paths: Record<string, Record<string, Operation>> };

/** What each error status means across the API (the messages themselves are in errors.md). */
const STATUS_MEANING: Record<string, string> = {
  '400': 'The request is invalid; the message names the field and what is wrong.',
  '401': 'No, an invalid, expired or revoked token.',
  '404': 'No such resource, or one another caller created.',
  '409': 'Conflict: the session is in use by another run, the job already finished, or the agent is generating a turn.',
  '410': 'The agent has exited.',
  '413': 'The body or prompt is too large (SERVICE_MAX_BODY_BYTES, SERVICE_MAX_PROMPT_BYTES).',
  '429': 'Rate limit (per client IP), or the caller\'s container or stream limit (SERVICE_MAX_CONTAINERS_PER_CALLER, SERVICE_AGENT_MAX_SUBSCRIBERS) is reached.',
  '500': 'The run failed: engine error, timeout, out of memory, or a failing lifecycle hook.',
  '502': 'The image registry failed.',
  '503': 'Podman, the engine credentials or the token blacklist are unavailable, or the server is at capacity (SERVICE_MAX_CONTAINERS, SERVICE_SSE_MAX_STREAMS).',
};

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

function typeOf(schema: Schema | undefined): string {
  if (!schema) return 'any';
  if (schema.const !== undefined) return `\`${JSON.stringify(schema.const)}\``;
  if (schema.enum) return schema.enum.map((v) => `\`${JSON.stringify(v)}\``).join(' \\| ');
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(' or ');
  if (schema.$ref) return schema.$ref.split('/').pop() ?? 'object';
  const type = Array.isArray(schema.type) ? schema.type.join(' \\| ') : (schema.type ?? 'object');
  if (type === 'array') return `array of ${typeOf(schema.items)}`;
  return schema.format ? `${type} (${schema.format})` : type;
}

function fieldRows(schema: Schema | undefined, prefix = ''): string[] {
  if (!schema?.properties) return [];
  const rows: string[] = [];
  for (const [name, field] of Object.entries(schema.properties)) {
    const required = schema.required?.includes(name) ? 'yes' : '';
    const notes = [field.description ?? '', field.default !== undefined ? `Default ${JSON.stringify(field.default)}.` : ''].filter(Boolean).join(' ');
    rows.push(`| \`${prefix}${name}\` | ${cell(typeOf(field))} | ${required} | ${cell(notes)} |`);
    // One level of nesting is shown (engine.*, container.*); deeper objects are described by their parent.
    if (prefix === '' && field.properties) rows.push(...fieldRows(field, `${name}.`));
  }
  return rows;
}

function table(header: string, rows: string[]): string[] {
  return rows.length === 0 ? [] : [header, header.replace(/[^|]+/g, '---'), ...rows, ''];
}

export function renderApiReference(doc: OpenApi): string {
  const out: string[] = [
    `# ${doc.info.title} API reference (${doc.info.version})`,
    '',
    '<!-- Generated from GET /swagger/doc.json by scripts/api-reference.ts; do not edit by hand. -->',
    '',
    `${doc.info.description ?? ''}`,
    '',
    'Every endpoint except those marked *open* needs `Authorization: Bearer <access token>` when authentication',
    'is on (the default; see [auth.md](auth.md)). Every error answers `{"error": "<message>", "status": "error"}`',
    'with the status listed; the messages are catalogued in [errors.md](errors.md). Request bodies are JSON; an',
    'unknown field is a 400 naming it. A caller sees only the sessions, jobs and agents it created.',
    '',
  ];
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      out.push(`## ${method.toUpperCase()} ${path}${operation.security?.length === 0 || path === '/health' || path === '/auth/token' ? ' (open)' : ''}`, '');
      if (operation.summary) out.push(`${operation.summary}.`, '');
      if (operation.description) out.push(operation.description.trim(), '');
      const parameters = (operation.parameters ?? []).map(
        (p) => `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required ? 'yes' : ''} | ${cell(p.description ?? p.schema?.description ?? '')} |`,
      );
      out.push(...table('| Parameter | In | Type | Required | Meaning |', parameters));
      const body = operation.requestBody?.content?.['application/json']?.schema;
      if (body) out.push('Request body:', '', ...table('| Field | Type | Required | Meaning |', fieldRows(body)));
      out.push('Responses:', '');
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const schema = response.content?.['application/json']?.schema;
        const fields = schema?.properties && !status.startsWith('4') && !status.startsWith('5') ? ` Fields: ${Object.keys(schema.properties).map((f) => `\`${f}\``).join(', ')}.` : '';
        const meaning = STATUS_MEANING[status] ?? (response.description === 'Default Response' ? 'Success.' : (response.description ?? ''));
        out.push(`- **${status}** ${cell(meaning)}${fields}`);
      }
      out.push('');
    }
  }
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const url = process.argv[2] ?? 'http://127.0.0.1:8080/swagger/doc.json';
  const doc = (await (await fetch(url)).json()) as OpenApi;
  process.stdout.write(renderApiReference(doc));
}
