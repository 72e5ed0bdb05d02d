// Regenerates everything derived from Berth's OpenAPI document after a change to a route schema, in one
// command (`npm run generate`): docs/api.md, the SDK's snapshot and types (packages/client/openapi.json,
// src/generated/openapi.ts) and the SDK's reference (docs/sdk/). It starts a throwaway Berth of its own
// (real Podman, authentication on, as `make up` runs it), reads GET /swagger/doc.json and stops it.
// Tests fail while any of these is stale (api-reference.test.ts, sdk.test.ts).
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { startTestBerth } from '../test/support/berth.js';
import { renderApiReference, type OpenApi } from './api-reference.js';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const berth = await startTestBerth({
  SERVICE_AUTH_ENABLED: 'true',
  SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
  SERVICE_API_TOKENS: randomBytes(24).toString('hex'),
});
try {
  const url = `${berth.url}/swagger/doc.json`;
  const document = (await (await fetch(url)).json()) as OpenApi;
  await writeFile(new URL('../docs/api.md', import.meta.url), renderApiReference(document));
  console.log('wrote docs/api.md');
  // Asynchronously: the Berth answering the generator lives in this process.
  process.stdout.write((await run('npx', ['tsx', 'packages/client/scripts/generate.ts', url], { cwd: root })).stdout);
} finally {
  await berth.stop();
}
await run('npm', ['run', '--silent', 'docs', '-w', '@berth/client'], { cwd: root });
console.log('wrote docs/sdk/');
