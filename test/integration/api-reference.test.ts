// docs/api.md is generated from the OpenAPI document the service serves; it must not go stale.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { renderApiReference } from '../../scripts/api-reference.js';

let t: TestBerth;
before(async () => {
  t = await startTestBerth();
});
after(async () => {
  await t?.stop();
});

test('docs/api.md is what scripts/api-reference.ts renders from GET /swagger/doc.json', async () => {
  const doc = await (await fetch(`${t.url}/swagger/doc.json`)).json();
  const committed = await readFile(join(import.meta.dirname, '..', '..', 'docs', 'api.md'), 'utf8');
  assert.equal(committed, renderApiReference(doc), 'regenerate: npx tsx scripts/api-reference.ts http://127.0.0.1:8080/swagger/doc.json > docs/api.md');
  assert.doesNotMatch(committed, /shared\/|spec\.md/, 'the reference stands on its own');
});
