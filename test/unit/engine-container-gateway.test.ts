// The engine container and the model gateway: no model credential in any form (no Podman secret, no
// variable, no file), the engine pointed at the gateway with a credential of its own in the input file the
// launch script exports, issued with the container and bound when its holder is known.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { validateRunRequest } from '../../src/core/validation/validate-run.js';
import { engineContainer, type EngineContainerSettings } from '../../src/core/containers/engine-container.js';
import { RunInputs } from '../../src/core/containers/run-inputs.js';
import type { EngineAccess } from '../../src/core/engine-access.js';
import type { PreparedSession } from '../../src/core/sessions/session-store.js';
import { RunGrants } from '../../src/core/gateway/run-grants.js';
import { engineHolder } from '../../src/core/gateway/grant-holder.js';
import { SqliteGrantStore } from '../../src/store/gateway/sqlite-grant-store.js';
import { GATEWAY_ENV_FILE_NAME } from '../../src/engine/layout.js';

const MODEL_KEY = 'sk-ant-the-real-key-never-in-a-container';
const config = loadConfig({ SERVICE_AUTH_ENABLED: 'false', SERVICE_EGRESS_DEFAULT_ALLOW: 'pypi.org' });
const access = {
  current: () => ({ mode: 'credentials-file', upstream: { baseUrl: 'https://api.anthropic.com', credential: { kind: 'api_key', value: MODEL_KEY } }, offline: false, message: '' }),
} as unknown as EngineAccess;

function settingsWith(grants: RunGrants): EngineContainerSettings {
  return {
    engineAccess: access,
    gateway: { url: 'http://10.89.0.1:8788', grants },
    engineTree: '/engine',
    instanceId: 'test',
    pidsLimit: 512,
    network: 'berth-agents-test',
    userNamespace: { kind: 'rootless' },
    workdirAutoCreate: true,
    inputs: new RunInputs('/sessions', '/sessions'),
  };
}

const SESSION = '3f2c1a7e-8d9b-4c1e-9f0a-1b2c3d4e5f60';
const session: PreparedSession = {
  sessionId: SESSION,
  engineSession: { kind: 'new', sessionId: SESSION },
  mountPath: '/sessions/.runs/run-1',
  persistent: true,
  release: async () => undefined,
};

async function planFor(request: Record<string, unknown> = {}) {
  return validateRunRequest({ prompt: 'hi', ...request }, { config, secretExists: async () => true });
}

function parseEnvFile(content: string): Record<string, string> {
  return Object.fromEntries(content.trimEnd().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
}

test('the container holds no model credential; the engine talks to the gateway with a token of its own', async () => {
  const grants = new RunGrants(new SqliteGrantStore(':memory:'));
  const plan = await planFor({ container: { secrets_env: { GH_TOKEN: 'gh-token' } } });
  const holder = engineHolder({ kind: 'run', runId: 'run-1', caller: 'alice', sessionId: SESSION, plan });
  const { spec, inputFiles } = engineContainer(settingsWith(grants), { id: 'run-1', plan, session, volumeSources: [], engineBinary: '/opt/claude/claude', holder });

  assert.ok(!JSON.stringify({ spec, inputFiles }).includes(MODEL_KEY), 'the model key appears nowhere');
  assert.deepEqual(spec.secretFiles.map((s) => s.secret), ['gh-token'], 'only the caller\'s own secrets');
  assert.equal(spec.env.ANTHROPIC_BASE_URL, 'http://10.89.0.1:8788');
  assert.equal(spec.env.ANTHROPIC_API_KEY, undefined, 'nothing in the environment Podman stores');
  assert.ok(!Object.values(spec.env).some((value) => value.includes('brt_')));

  const file = inputFiles.find((f) => f.name === GATEWAY_ENV_FILE_NAME);
  assert.ok(file, 'the gateway file is among the input files');
  const variables = parseEnvFile(file.content);
  const token = variables.ANTHROPIC_API_KEY!;
  assert.match(token, /^brt_[0-9a-f]{64}$/);
  const proxy = `http://berth:${token}@10.89.0.1:8788`;
  assert.deepEqual(variables, {
    ANTHROPIC_API_KEY: token,
    HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy,
    NO_PROXY: '10.89.0.1,localhost,127.0.0.1', no_proxy: '10.89.0.1,localhost,127.0.0.1',
  });

  const grant = grants.lookup(token);
  assert.equal(grant?.state, 'bound');
  assert.deepEqual(grant?.state === 'bound' && grant.holder, holder);
  assert.deepEqual(holder.policy.mode === 'allowlist' && holder.policy.allow.map((p) => p.text), ['pypi.org']);
});

test('a pooled engine\'s token is issued unbound (refused until its claim); a new container of the same id replaces it', async () => {
  const grants = new RunGrants(new SqliteGrantStore(':memory:'));
  const plan = await planFor();
  const make = () => engineContainer(settingsWith(grants), { id: 'run-pooled', plan, session, volumeSources: [], engineBinary: '/opt/claude/claude', pooled: true });
  const tokenOf = (made: ReturnType<typeof make>) => parseEnvFile(made.inputFiles.find((f) => f.name === GATEWAY_ENV_FILE_NAME)!.content).ANTHROPIC_API_KEY!;
  const first = tokenOf(make());
  assert.equal(grants.lookup(first)?.state, 'issued');
  const second = tokenOf(make());
  assert.equal(grants.lookup(first), undefined);
  assert.equal(grants.lookup(second)?.state, 'issued');
});

test('the run\'s budget travels with its holder', async () => {
  const plan = await planFor({ engine: { max_budget_usd: 0.25 } });
  assert.equal(engineHolder({ kind: 'run', runId: 'run-1', caller: 'alice', sessionId: SESSION, plan }).budgetUsd, 0.25);
  assert.equal('budgetUsd' in engineHolder({ kind: 'run', runId: 'run-1', caller: 'alice', sessionId: SESSION, plan: await planFor() }), false);
});
