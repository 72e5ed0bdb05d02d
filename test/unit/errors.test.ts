import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import { Type } from '@sinclair/typebox';
import { BerthError, ERROR_STATUS, errors } from '../../src/errors.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { createValidatorCompiler } from '../../src/http/validators.js';

test('docs/errors.md lists exactly the catalogue, with the same statuses', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = Object.fromEntries(
    [...doc.matchAll(/^\| (BERTH_ERR_[A-Z_]+) \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]),
  );
  assert.deepEqual(documented, { ...ERROR_STATUS });
});

async function app() {
  const instance = Fastify({ bodyLimit: 1024 });
  instance.setValidatorCompiler(createValidatorCompiler());
  registerErrorHandler(instance);
  instance.post('/echo', { schema: { body: Type.Object({ name: Type.String(), nested: Type.Optional(Type.Object({ n: Type.Integer() }, { additionalProperties: false })) }, { additionalProperties: false }) } }, async (request) => request.body);
  instance.get('/berth', async () => {
    throw errors.sessionBusy('abc');
  });
  instance.get('/boom', async () => {
    throw new Error('secret internal detail');
  });
  await instance.ready();
  return instance;
}

function assertErrorBody(body: string, pattern: RegExp) {
  const parsed = JSON.parse(body);
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'status']);
  assert.equal(parsed.status, 'error');
  assert.match(parsed.error, pattern);
}

const cases: [string, () => Promise<{ statusCode: number; body: string }>, number, RegExp][] = [];

test('every failure has the error body {error, status: "error"} and its status', async () => {
  const instance = await app();
  const inject = (options: { method: 'GET' | 'POST'; url: string; payload?: string | object; headers?: Record<string, string> }) =>
    instance.inject(options);
  cases.push(
    ['unknown field', () => inject({ method: 'POST', url: '/echo', payload: { name: 'a', extra: 1 } }), 400, /unknown field "extra"/],
    ['nested unknown field', () => inject({ method: 'POST', url: '/echo', payload: { name: 'a', nested: { n: 1, typo: 2 } } }), 400, /nested: unknown field "typo"/],
    ['missing field', () => inject({ method: 'POST', url: '/echo', payload: {} }), 400, /name is required/],
    ['wrong type, no coercion', () => inject({ method: 'POST', url: '/echo', payload: { name: 5 } }), 400, /name must be of type string/],
    ['bad JSON', () => inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"name":' }), 400, /not valid JSON/],
    ['body too large', () => inject({ method: 'POST', url: '/echo', payload: { name: 'x'.repeat(5000) } }), 413, /too large/],
    ['unknown route', () => inject({ method: 'GET', url: '/nope?x=1' }), 404, /no route GET \/nope/],
    ['catalogue error', () => inject({ method: 'GET', url: '/berth' }), 409, /session abc is in use/],
    ['unexpected error', () => inject({ method: 'GET', url: '/boom' }), 500, /^internal error/],
  );
  for (const [name, call, status, pattern] of cases) {
    const response = await call();
    assert.equal(response.statusCode, status, name);
    assertErrorBody(response.body, pattern);
    assert.ok(!response.body.includes('secret internal detail'), name);
  }
  await instance.close();
});

test('BerthError carries the catalogue status of its code', () => {
  for (const code of Object.keys(ERROR_STATUS) as (keyof typeof ERROR_STATUS)[]) {
    assert.equal(new BerthError(code, 'm').status, ERROR_STATUS[code]);
  }
});
