// GET /version: open like /health, and says what is running.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { ENGINE_VERSION } from '../../src/config.js';

let t: TestBerth;
before(async () => {
  ({ t } = await startBerthWithCallers([]));
});
after(async () => {
  await t?.stop();
});

test('GET /version answers without a token: versions, images and the commit of this checkout', async () => {
  const response = await t.request('GET', '/version');
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: import.meta.dirname }).toString().trim();
  assert.deepEqual(response.body, {
    version: t.config.version,
    api_version: '1',
    engine_version: ENGINE_VERSION,
    engine_image: t.config.agent.engineImage,
    agent_image: t.config.agent.image,
    commit: head,
  });
  assert.equal((await t.request('GET', '/sessions')).status, 401, 'the rest still needs a token');
});
