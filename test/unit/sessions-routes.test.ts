// The /sessions routes over HTTP (Fastify inject), with the real store on a temporary directory:
// query and path validation, response shapes, status codes.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { createValidatorCompiler } from '../../src/http/validators.js';
import { ErrorBodySchema } from '../../src/http/schemas.js';
import { registerSessionRoutes } from '../../src/http/routes/sessions.js';
import { SessionStore } from '../../src/core/sessions/session-store.js';
import { SessionService } from '../../src/core/sessions/session-service.js';

const ID = 'aaaaaaaa-0000-4000-8000-000000000001';
let root: string;
let app: FastifyInstance;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'berth-session-routes-'));
  const store = new SessionStore(join(root, 'sessions'), join(root, 'sessions'), { transcriptLimitBytes: 1024 * 1024 });
  await store.init();
  const project = join(store.dir, ID, 'projects', '-workspace');
  mkdirSync(project, { recursive: true });
  const lines = [
    { type: 'custom-title', customTitle: 'A title' },
    { type: 'user', uuid: '10000000-0000-4000-8000-000000000000', message: { role: 'user', content: 'hello' } },
    { type: 'assistant', uuid: '20000000-0000-4000-8000-000000000000', message: { id: 'm', role: 'assistant', content: [{ type: 'text', text: 'hi' }] } },
  ];
  writeFileSync(join(project, `${ID}.jsonl`), lines.map((l) => JSON.stringify(l)).join('\n'));
  app = Fastify();
  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  app.addSchema(ErrorBodySchema);
  registerSessionRoutes(app, { sessions: new SessionService({ store, maxPageSize: 100 }) });
  await app.ready();
});
after(async () => {
  await app.close();
  rmSync(root, { recursive: true, force: true });
});

async function get(url: string) {
  const response = await app.inject({ method: 'GET', url });
  return { status: response.statusCode, body: response.json() };
}

describe('GET /sessions', () => {
  it('lists id and title', async () => {
    assert.deepEqual(await get('/sessions'), { status: 200, body: { sessions: [{ id: ID, title: 'A title' }] } });
  });
});

describe('GET /sessions/:id/messages', () => {
  it('answers messages with ids, the total and the page applied', async () => {
    const { status, body } = await get(`/sessions/${ID}/messages?limit=1&offset=1`);
    assert.equal(status, 200);
    assert.deepEqual(body, { messages: [{ id: '20000000-0000-4000-8000-000000000000', role: 'assistant', content: 'hi' }], total: 2, limit: 1, offset: 1, has_more: false });
  });

  it('clamps a limit above the maximum', async () => {
    assert.equal((await get(`/sessions/${ID}/messages?limit=5000`)).body.limit, 100);
  });

  for (const query of ['limit=-1', 'offset=-1', 'limit=1.5', 'offset=0.5', 'limit=abc', 'offset=', 'offset=1e999']) {
    it(`refuses ?${query} with 400`, async () => {
      const { status, body } = await get(`/sessions/${ID}/messages?${query}`);
      assert.equal(status, 400);
      assert.equal(body.status, 'error');
    });
  }

  it('answers 404 for a session id that is not a UUID, without touching files', async () => {
    const before = readdirSync(root, { recursive: true });
    for (const id of ['..%2F..%2Fetc', 'sess-example123']) {
      const { status, body } = await get(`/sessions/${id}/messages`);
      assert.equal(status, 404);
      assert.equal(body.status, 'error');
      assert.match(body.error, /^session .* not found$/);
    }
    assert.deepEqual(readdirSync(root, { recursive: true }), before);
  });

  it('answers 404 for an unknown session', async () => {
    assert.equal((await get('/sessions/bbbbbbbb-0000-4000-8000-000000000002/messages')).status, 404);
  });
});

describe('GET /sessions/:id/messages/:message_id', () => {
  it('answers one message', async () => {
    assert.deepEqual(await get(`/sessions/${ID}/messages/10000000-0000-4000-8000-000000000000`), {
      status: 200,
      body: { id: '10000000-0000-4000-8000-000000000000', role: 'user', content: 'hello' },
    });
  });

  it('answers 404 for an unknown message', async () => {
    assert.equal((await get(`/sessions/${ID}/messages/30000000-0000-4000-8000-000000000000`)).status, 404);
  });

  it('answers 404 with the session-not-found body for a session id that is not a UUID, without touching files', async () => {
    const before = readdirSync(root, { recursive: true });
    for (const id of ['sess-example123', '..%2F..%2Fetc', 'x']) {
      const response = await get(`/sessions/${id}/messages/10000000-0000-4000-8000-000000000000`);
      assert.deepEqual(response, { status: 404, body: { error: `session ${decodeURIComponent(id)} not found`, status: 'error' } });
    }
    assert.deepEqual(readdirSync(root, { recursive: true }), before);
  });
});

describe('DELETE /sessions/:id', () => {
  it('answers 404 for a session id that is not a UUID, without touching files', async () => {
    const before = readdirSync(root, { recursive: true });
    for (const id of ['..%2F..%2Fetc', 'sess-example123']) {
      const response = await app.inject({ method: 'DELETE', url: `/sessions/${id}` });
      assert.equal(response.statusCode, 404);
      assert.deepEqual(response.json(), { error: `session ${decodeURIComponent(id)} not found`, status: 'error' });
    }
    assert.deepEqual(readdirSync(root, { recursive: true }), before);
  });

  it('deletes, then answers 404', async () => {
    const first = await app.inject({ method: 'DELETE', url: `/sessions/${ID}` });
    assert.deepEqual({ status: first.statusCode, body: first.json() }, { status: 200, body: { success: true, session_id: ID } });
    assert.equal((await app.inject({ method: 'DELETE', url: `/sessions/${ID}` })).statusCode, 404);
  });
});

describe('the OpenAPI document of the session routes', () => {
  let doc: { paths: Record<string, Record<string, { parameters?: { name: string; description?: string }[]; responses: Record<string, any> }>> };
  before(async () => {
    const documented = Fastify();
    documented.addSchema(ErrorBodySchema);
    await documented.register(swagger, { openapi: { openapi: '3.0.3', info: { title: 'Berth', version: 'test' } } });
    registerSessionRoutes(documented, { sessions: {} as SessionService });
    await documented.ready();
    doc = documented.swagger() as unknown as typeof doc;
    await documented.close();
  });

  it('shows has_more in the messages page', () => {
    const page = doc.paths['/sessions/{id}/messages']!['get']!.responses['200'].content['application/json'].schema;
    assert.equal(page.properties.has_more.type, 'boolean');
    assert.ok(page.required.includes('has_more'));
  });

  it('documents a session id that names no session as 404, never as 400', () => {
    for (const [path, method] of [['/sessions/{id}/messages', 'get'], ['/sessions/{id}/messages/{message_id}', 'get'], ['/sessions/{id}', 'delete']] as const) {
      const operation = doc.paths[path]![method]!;
      assert.match(operation.responses['404'].description, /`session <id> not found`/, `${method} ${path}`);
      assert.match(operation.parameters!.find((p) => p.name === 'id')!.description!, /404/, `${method} ${path}`);
      assert.doesNotMatch(operation.parameters!.find((p) => p.name === 'id')!.description!, /400/, `${method} ${path}`);
    }
    assert.equal(doc.paths['/sessions/{id}']!['delete']!.responses['400'], undefined);
    assert.equal(doc.paths['/sessions/{id}/messages/{message_id}']!['get']!.responses['400'], undefined);
  });
});
