// docs/api.md is generated from the OpenAPI document the service serves; it must not go stale, and the
// examples it shows must be what the schemas accept and answer.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { renderApiReference, type OpenApi } from '../../scripts/api-reference.js';

let t: TestBerth;
let doc: OpenApi;
before(async () => {
  t = await startTestBerth();
  doc = (await (await fetch(`${t.url}/swagger/doc.json`)).json()) as OpenApi;
});
after(async () => {
  await t?.stop();
});

test('docs/api.md is what scripts/api-reference.ts renders from GET /swagger/doc.json', async () => {
  const committed = await readFile(join(import.meta.dirname, '..', '..', 'docs', 'api.md'), 'utf8');
  assert.equal(committed, renderApiReference(doc), 'regenerate: npx tsx scripts/api-reference.ts http://127.0.0.1:8080/swagger/doc.json > docs/api.md');
});

test('the reference and the OpenAPI document stand on their own: no pointer to a document the reader lacks', async () => {
  const committed = await readFile(join(import.meta.dirname, '..', '..', 'docs', 'api.md'), 'utf8');
  for (const text of [committed, JSON.stringify(doc)]) {
    assert.doesNotMatch(text, /\.\.\/shared|spec\.md|\bthe spec\b|\bspec's\b/i);
  }
});

test('every endpoint has an example of its JSON request body and success answer, valid against its schema', () => {
  // OpenAPI 3.0 schemas: Ajv knows `nullable`, `example` is an annotation; formats are not checked here.
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  const checked: string[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const where = `${method.toUpperCase()} ${path}`;
      const body = operation.requestBody?.content?.['application/json'];
      if (body?.schema) {
        assert.notEqual(body.example, undefined, `${where}: request body example`);
        assert.ok(ajv.validate(body.schema, body.example), `${where} request example: ${ajv.errorsText()}`);
      }
      const [status, success] = Object.entries(operation.responses ?? {}).find(([code]) => code.startsWith('2')) ?? [];
      const media = success?.content?.['application/json'];
      if (media?.schema) {
        assert.notEqual(media.example, undefined, `${where}: ${status} example`);
        assert.ok(ajv.validate(media.schema, media.example), `${where} ${status} example: ${ajv.errorsText()}`);
      }
      checked.push(where);
    }
  }
  assert.ok(checked.length >= 28, `${checked.length} endpoints checked`);
});
