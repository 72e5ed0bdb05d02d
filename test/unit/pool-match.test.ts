import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { validateRunRequest } from '../../src/core/validation/validate-run.js';
import { poolMissReason } from '../../src/core/pool/pool-match.js';
import type { RunRequest } from '../../src/core/run-request.js';

const config = loadConfig({
  SERVICE_AUTH_ENABLED: 'false',
  SERVICE_DATA_DIR: '/srv/berth/data',
  SERVICE_AGENT_SESSIONS_DIR: '/srv/berth/sessions',
  SERVICE_AGENT_ALLOWED_VOLUMES: '/',
  SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'localhost/*',
});
const plan = (request: RunRequest) =>
  validateRunRequest(request, { config, secretExists: async () => true, fs: { realpath: async (p) => p, lstat: async () => ({}) } });

test('the default request and what does not change the container or the engine command hit', async () => {
  const template = await plan({ prompt: 'pooled engine' });
  for (const request of [
    { prompt: 'say: hi' },
    { prompt: 'say: hi', engine: { output_format: 'json' as const } },
    { prompt: 'say: hi', engine: { output_format: 'stream-json' as const } },
    { prompt: 'say: hi', container: { timeout: '1m' } },
    { prompt: 'say: hi', container: { memory: '512m', cpus: '1', cpu_shares: 1024 } },
    { prompt: 'say: hi', container: { disk: '2g' } },
    { prompt: 'say: hi', engine: { dangerously_skip_permissions: true } },
    { prompt: 'say: hi', workdir: '/workspace' },
    // Enforced by the model gateway through the credential the claim binds, not by the container or the engine.
    { prompt: 'say: hi', engine: { max_budget_usd: 0.5 } },
    { prompt: 'say: hi', container: { network: { mode: 'none' as const } } },
  ] satisfies RunRequest[]) {
    assert.equal(poolMissReason(await plan(request), template), undefined, JSON.stringify(request));
  }
});

test('every other class of request misses, with its reason', async () => {
  const template = await plan({ prompt: 'pooled engine' });
  const session = '3f2c1a7e-8d9b-4c1e-9f0a-1b2c3d4e5f60';
  const cases: [RunRequest, string][] = [
    [{ prompt: 'x', engine: { session_id: session, resume: true } }, 'session'],
    [{ prompt: 'x', engine: { session_id: session, fork_session: true } }, 'session'],
    [{ prompt: 'x', engine: { continue: true } }, 'session'],
    [{ prompt: 'x', engine: { no_persistence: true } }, 'session'],
    [{ prompt: 'x', container: { image: 'localhost/other:1' } }, 'image'],
    [{ prompt: 'x', workdir: '/src' }, 'workdir'],
    [{ prompt: 'x', container: { volumes: ['/tmp:/data'] } }, 'volumes'],
    [{ prompt: 'x', container: { secrets_env: { TOKEN: 'gh' } } }, 'secrets'],
    [{ prompt: 'x', container: { memory: '1g' } }, 'limits'],
    [{ prompt: 'x', container: { cpus: '0.5' } }, 'limits'],
    [{ prompt: 'x', container: { disk: '1g' } }, 'limits'],
    [{ prompt: 'x', container: { lifecycle: { post_start: ['true'] } } }, 'lifecycle'],
    [{ prompt: 'x', engine: { model: 'opus' } }, 'engine_options'],
    [{ prompt: 'x', engine: { max_turns: 3 } }, 'engine_options'],
    [{ prompt: 'x', engine: { system_prompt: 'be brief' } }, 'engine_options'],
    [{ prompt: 'x', engine: { json_schema: { type: 'object' } } }, 'engine_options'],
    [{ prompt: 'x', engine: { dangerously_skip_permissions: false } }, 'engine_options'],
    [{ prompt: 'x', engine: { prompt_caching_ttl: '1h' } }, 'engine_options'],
  ];
  for (const [request, reason] of cases) assert.equal(poolMissReason(await plan(request), template), reason, JSON.stringify(request));
});
