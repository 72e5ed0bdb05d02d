// The workspace routes on a Berth that cannot mount file systems (rootless): every one answers 503 saying
// workspaces need a rootful Berth, before looking at anything else (a git body included).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify, { type InjectOptions } from 'fastify';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { createValidatorCompiler } from '../../src/http/validators.js';
import { ErrorBodySchema } from '../../src/http/schemas.js';
import { registerWorkspaceRoutes } from '../../src/http/routes/workspaces.js';
import { WorkspaceService } from '../../src/core/workspaces/workspace-service.js';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';

test('without disks every workspace route answers 503 BERTH_ERR_RUNTIME_UNAVAILABLE saying workspaces need a rootful Berth', async () => {
  const app = Fastify();
  app.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(app);
  app.addSchema(ErrorBodySchema);
  const workspaces = new WorkspaceService({
    store: new SqliteWorkspaceStore(':memory:'),
    disks: undefined,
    settings: { maxBytes: 1 << 20, maxFiles: 100, ttlMs: 1000, maxPerCaller: 5, diffMaxFileBytes: 1024, fileOwner: { uid: 1000, gid: 1000 } },
  });
  registerWorkspaceRoutes(app, { workspaces });
  await app.ready();
  const id = '00000000-0000-4000-8000-000000000001';
  const requests = [
    { method: 'POST', url: '/workspaces', payload: {} },
    { method: 'POST', url: '/workspaces', payload: { git: { url: 'https://example.com/r.git' } } },
    { method: 'GET', url: '/workspaces' },
    { method: 'GET', url: `/workspaces/${id}` },
    { method: 'DELETE', url: `/workspaces/${id}` },
    { method: 'GET', url: `/workspaces/${id}/files` },
    { method: 'GET', url: `/workspaces/${id}/files/a.txt` },
    { method: 'PUT', url: `/workspaces/${id}/files/a.txt`, payload: 'x', headers: { 'content-type': 'text/plain' } },
    { method: 'DELETE', url: `/workspaces/${id}/files/a.txt` },
  ] satisfies InjectOptions[];
  for (const request of requests) {
    const answer = await app.inject(request);
    assert.equal(answer.statusCode, 503, `${request.method} ${request.url}: ${answer.body}`);
    assert.match(answer.json().error, /workspaces need a rootful Berth/);
    assert.equal(answer.json().status, 'error');
  }
  await app.close();
});
