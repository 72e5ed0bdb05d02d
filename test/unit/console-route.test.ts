// The web console's route (GET /console…): static files open without a token, history-routing fallback,
// security headers on every answer, a 503 saying how to build it while its build is missing, and nothing
// of it in the OpenAPI document.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { AuthService } from '../../src/core/auth/auth-service.js';
import { TokenService } from '../../src/core/auth/tokens.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { registerAuth } from '../../src/http/plugins/auth.js';
import { registerRateLimit } from '../../src/http/plugins/rate-limit.js';
import { CONSOLE_SECURITY_HEADERS, registerConsoleRoutes } from '../../src/http/routes/console.js';
import { createMetrics } from '../../src/metrics/metrics.js';

const INDEX = '<!doctype html><title>Berth</title><script type="module" src="/console/assets/index-3f2a1b.js"></script>';
const SCRIPT = 'console.log("berth");';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** A directory laid out like the console's build, or an empty one (`built: false`). */
async function consoleBuild(built = true): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'console-route-'));
  dirs.push(dir);
  if (built) await writeBuild(dir);
  return dir;
}

async function writeBuild(dir: string): Promise<void> {
  await mkdir(join(dir, 'assets'), { recursive: true });
  await writeFile(join(dir, 'index.html'), INDEX);
  await writeFile(join(dir, 'assets', 'index-3f2a1b.js'), SCRIPT);
  await writeFile(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  await writeFile(join(dir, '.env'), 'SECRET=1');
}

/** Berth's request pipeline around the console route: error bodies, rate limit, authentication on. */
async function app(dir: string, options: { rateLimit?: boolean } = {}): Promise<FastifyInstance> {
  const metrics = createMetrics();
  const tokens = new TokenService({ secret: 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%', accessTtlMs: 60_000, refreshTtlMs: 120_000 });
  const server = Fastify();
  registerErrorHandler(server);
  await server.register(swagger, { openapi: { openapi: '3.0.3', info: { title: 'Berth', version: '0' } } });
  if (options.rateLimit) registerRateLimit(server, { rps: 1, burst: 2, trustedProxies: [], metrics });
  registerAuth(server, { enabled: true, auth: new AuthService({ tokens, blacklist: undefined, apiTokens: [], log: { error: () => undefined } }), metrics });
  server.get('/jobs', async () => ({ jobs: [] }));
  await registerConsoleRoutes(server, { dir });
  await server.ready();
  return server;
}

function assertSecurityHeaders(headers: Record<string, unknown>, what: string): void {
  for (const [name, value] of Object.entries(CONSOLE_SECURITY_HEADERS)) assert.equal(headers[name.toLowerCase()], value, `${name} on ${what}`);
}

describe('the web console route', () => {
  it('serves index.html at /console and /console/ without a token, while the API still needs one', async () => {
    const server = await app(await consoleBuild());
    for (const url of ['/console', '/console/']) {
      const response = await server.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 200, url);
      assert.match(String(response.headers['content-type']), /^text\/html/);
      assert.equal(response.body, INDEX);
      assert.equal(response.headers['cache-control'], 'no-cache');
    }
    assert.equal((await server.inject({ method: 'GET', url: '/jobs' })).statusCode, 401);
  });

  it('answers a page of the app (a path without a file extension) with index.html', async () => {
    const server = await app(await consoleBuild());
    for (const url of ['/console/agents', '/console/agents/agent-1a2b', '/console/jobs/job-9?x=1']) {
      const response = await server.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 200, url);
      assert.equal(response.body, INDEX, url);
    }
  });

  it('serves hashed assets as immutable with their content type, and other files revalidated', async () => {
    const server = await app(await consoleBuild());
    const script = await server.inject({ method: 'GET', url: '/console/assets/index-3f2a1b.js' });
    assert.equal(script.statusCode, 200);
    assert.equal(script.body, SCRIPT);
    assert.match(String(script.headers['content-type']), /javascript/);
    assert.match(String(script.headers['cache-control']), /immutable/);
    const icon = await server.inject({ method: 'GET', url: '/console/favicon.svg' });
    assert.equal(icon.statusCode, 200);
    assert.match(String(icon.headers['content-type']), /^image\/svg\+xml/);
    assert.equal(icon.headers['cache-control'], 'no-cache');
  });

  it('answers HEAD like GET', async () => {
    const server = await app(await consoleBuild());
    const response = await server.inject({ method: 'HEAD', url: '/console/' });
    assert.equal(response.statusCode, 200);
    assert.equal(response.body, '');
  });

  it('answers a missing file, a dotfile and a path out of the build with Berth\'s 404 body, never index.html', async () => {
    const server = await app(await consoleBuild());
    for (const url of ['/console/assets/missing.js', '/console/.env', '/console/..%2f..%2fetc%2fpasswd.txt', '/console/assets/..%2f..%2f.env', '/console/a%00b.js']) {
      const response = await server.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 404, url);
      assert.equal(response.json().status, 'error', url);
      assert.doesNotMatch(response.body, /SECRET|<!doctype/i, url);
    }
  });

  it('puts the security headers on every answer: files, pages, 404s and the not-built 503', async () => {
    const built = await app(await consoleBuild());
    for (const url of ['/console', '/console/assets/index-3f2a1b.js', '/console/sessions', '/console/assets/missing.js']) {
      assertSecurityHeaders((await built.inject({ method: 'GET', url })).headers, url);
    }
    const csp = CONSOLE_SECURITY_HEADERS['Content-Security-Policy']!;
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /connect-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*|https?:/);
    assertSecurityHeaders((await (await app(await consoleBuild(false))).inject({ method: 'GET', url: '/console' })).headers, 'not built');
  });

  it('answers 503 with Berth\'s error body while the console is not built, and serves it once built, without a restart', async () => {
    const dir = await consoleBuild(false);
    const server = await app(dir);
    for (const url of ['/console', '/console/', '/console/agents', '/console/assets/index-3f2a1b.js']) {
      const response = await server.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 503, url);
      assert.match(String(response.headers['content-type']), /^application\/json/);
      assert.deepEqual(response.json(), { error: 'the web console is not built: run make setup', status: 'error' });
    }
    await writeBuild(dir);
    const response = await server.inject({ method: 'GET', url: '/console' });
    assert.equal(response.statusCode, 200);
    assert.equal(response.body, INDEX);
  });

  it('is rate limited like every route of the API listener', async () => {
    const server = await app(await consoleBuild(), { rateLimit: true });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await server.inject({ method: 'GET', url: '/console/' }));
    assert.deepEqual(answers.map((a) => a.statusCode), [200, 200, 429]);
    assert.equal(answers[0]!.headers['x-ratelimit-remaining'], '1');
  });

  it('is not part of the OpenAPI document', async () => {
    const server = await app(await consoleBuild());
    const paths = Object.keys((server.swagger() as { paths?: Record<string, unknown> }).paths ?? {});
    assert.deepEqual(paths.filter((path) => path.startsWith('/console')), []);
    assert.ok(paths.includes('/jobs'), 'the document lists the other routes');
  });
});
