import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withTranslatedErrors } from '../../src/core/runtime-errors.js';
import { RuntimeError } from '../../src/runtime/ports/runtime-error.js';
import { refused } from './support/refused.js';

function fake(error: Error) {
  return {
    async ping() {
      throw error;
    },
    label: 'kept',
  };
}

test('an unreachable runtime becomes the catalogue\'s 503 for core services', async () => {
  const runtime = withTranslatedErrors(fake(new RuntimeError('cannot reach Podman at /x.sock', true)));
  await assert.rejects(runtime.ping(), refused(/container runtime unavailable: cannot reach Podman/, 503));
});

test('other runtime failures and properties pass through unchanged', async () => {
  const refused = new RuntimeError('Podman refused', false);
  const runtime = withTranslatedErrors(fake(refused));
  await assert.rejects(runtime.ping(), (error: unknown) => error === refused);
  assert.equal(runtime.label, 'kept');
});
