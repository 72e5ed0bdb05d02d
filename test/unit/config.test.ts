import { describe, it, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';

const base = { SERVICE_AUTH_ENABLED: 'false' };

function refusal(env: Record<string, string>): string {
  try {
    loadConfig({ ...base, ...env });
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error.message;
  }
  assert.fail(`configuration ${JSON.stringify(env)} was accepted`);
}

test('defaults match the documented values', () => {
  const config = loadConfig(base);
  assert.deepEqual(config.address, { host: '127.0.0.1', port: 8080 });
  assert.deepEqual(config.metricsAddress, { host: '127.0.0.1', port: 9090 });
  assert.equal(config.logFormat, 'json');
  assert.equal(config.logLevel, 'info');
  assert.match(config.agent.image, /^localhost\/berth-agent:\d+\.\d+\.\d+-alpha$/);
  assert.match(config.agent.engineImage, /^localhost\/berth-engine:\d+\.\d+\.\d+$/);
  assert.ok(config.agent.sessionsDir.endsWith('/.service/sessions'));
  assert.equal(config.agent.sessionsHostDir, config.agent.sessionsDir);
  assert.equal(config.agent.workdirAutoCreate, true);
  assert.equal(config.podmanSocket, undefined);
  assert.equal(config.agent.defaultMemoryBytes, 512 * 1024 * 1024);
  assert.equal(config.agent.defaultCpus, 1);
  assert.equal(config.agent.defaultCpuShares, 1024);
  assert.equal(config.agent.defaultTimeoutMs, 30 * 60_000);
  assert.equal(config.maxPromptBytes, 1024 * 1024);
  assert.deepEqual(config.agent.allowedVolumes, []);
  assert.equal(config.auth.accessTtlMs, 24 * 3_600_000);
  assert.equal(config.auth.refreshTtlMs, 7 * 24 * 3_600_000);
});

test('the configuration object is frozen', () => {
  const config = loadConfig(base);
  assert.ok(Object.isFrozen(config));
  assert.ok(Object.isFrozen(config.agent));
  assert.ok(Object.isFrozen(config.agent.allowedVolumes));
});

test('values are read from SERVICE_* variables', () => {
  const config = loadConfig({
    ...base,
    SERVICE_ADDRESS: '0.0.0.0:9000',
    SERVICE_METRICS_ADDRESS: '[::1]:9100',
    SERVICE_LOG_FORMAT: 'text',
    SERVICE_LOG_LEVEL: 'debug',
    SERVICE_AGENT_SESSIONS_DIR: '/srv/sessions',
    SERVICE_AGENT_SESSIONS_HOST_DIR: '/srv/projects/sessions',
    SERVICE_AGENT_WORKDIR_AUTO_CREATE: 'false',
    SERVICE_PODMAN_SOCKET: '/run/podman/podman.sock',
    SERVICE_AGENT_ALLOWED_VOLUMES: '/data, /srv/projects',
    SERVICE_AGENT_MAX_TIMEOUT: '2h',
  });
  assert.deepEqual(config.address, { host: '0.0.0.0', port: 9000 });
  assert.deepEqual(config.metricsAddress, { host: '::1', port: 9100 });
  assert.equal(config.logFormat, 'text');
  assert.equal(config.logLevel, 'debug');
  assert.equal(config.agent.sessionsDir, '/srv/sessions');
  assert.equal(config.agent.sessionsHostDir, '/srv/projects/sessions');
  assert.equal(config.agent.workdirAutoCreate, false);
  assert.equal(config.podmanSocket, '/run/podman/podman.sock');
  assert.deepEqual(config.agent.allowedVolumes, ['/data', '/srv/projects']);
  assert.equal(config.agent.maxTimeoutMs, 2 * 3_600_000);
});

const invalid: [string, string, RegExp][] = [
  ['SERVICE_ADDRESS', 'localhost', /SERVICE_ADDRESS: "localhost" is not an address/],
  ['SERVICE_ADDRESS', '127.0.0.1:99999', /SERVICE_ADDRESS/],
  ['SERVICE_LOG_FORMAT', 'xml', /SERVICE_LOG_FORMAT: "xml" is not one of json, text/],
  ['SERVICE_LOG_LEVEL', 'verbose', /SERVICE_LOG_LEVEL/],
  ['SERVICE_AGENT_WORKDIR_AUTO_CREATE', 'maybe', /SERVICE_AGENT_WORKDIR_AUTO_CREATE: "maybe" is not a boolean/],
  ['SERVICE_AGENT_MAX_MEMORY', '8 gigs', /SERVICE_AGENT_MAX_MEMORY/],
  ['SERVICE_AGENT_MAX_TIMEOUT', '0s', /SERVICE_AGENT_MAX_TIMEOUT/],
  ['SERVICE_MAX_CONCURRENT_RUNS', '0', /SERVICE_MAX_CONCURRENT_RUNS/],
  ['SERVICE_MAX_PROMPT_BYTES', '-5', /SERVICE_MAX_PROMPT_BYTES/],
  ['SERVICE_AGENT_ALLOWED_VOLUMES', 'data', /SERVICE_AGENT_ALLOWED_VOLUMES: "data" is not an absolute path/],
  ['SERVICE_AGENT_DEFAULT_MEMORY', '16g', /SERVICE_AGENT_DEFAULT_MEMORY: is larger than SERVICE_AGENT_MAX_MEMORY/],
  ['SERVICE_INSTANCE_NAME', 'has space', /SERVICE_INSTANCE_NAME/],
  ['SERVICE_AGENT_SESSIONS_HOST_DIR', '/host/sessions', /SERVICE_AGENT_SESSIONS_HOST_DIR: "\/host\/sessions" must also be in SERVICE_AGENT_ALLOWED_VOLUMES/],
];

for (const [variable, value, message] of invalid) {
  test(`${variable}=${JSON.stringify(value)} stops the start with a message naming the variable`, () => {
    assert.match(refusal({ [variable]: value }), message);
  });
}

test('authentication is on by default and then needs a strong JWT secret', () => {
  assert.throws(() => loadConfig({}), /SERVICE_JWT_SECRET: is empty/);
  const config = loadConfig({ SERVICE_JWT_SECRET: 'f3a9c1d27b8e4e6a9d0c5b2a7f1e3d9c' });
  assert.equal(config.auth.enabled, true);
});

describe('tracing settings', () => {
  const base = { SERVICE_AUTH_ENABLED: 'false' };
  it('is off without an endpoint, and takes an https endpoint as it is', () => {
    assert.equal(loadConfig(base).tracing.endpoint, undefined);
    assert.equal(loadConfig({ ...base, SERVICE_TRACING_ENDPOINT: 'https://collector:4318/v1/traces' }).tracing.endpoint, 'https://collector:4318/v1/traces');
  });
  it('refuses a plain http endpoint unless SERVICE_TRACING_INSECURE=true, naming both variables', () => {
    assert.throws(
      () => loadConfig({ ...base, SERVICE_TRACING_ENDPOINT: 'http://collector:4318/v1/traces' }),
      (error: unknown) => error instanceof ConfigError && /SERVICE_TRACING_ENDPOINT/.test(error.message) && /SERVICE_TRACING_INSECURE=true/.test(error.message),
    );
    assert.equal(loadConfig({ ...base, SERVICE_TRACING_ENDPOINT: 'http://collector:4318/v1/traces', SERVICE_TRACING_INSECURE: 'true' }).tracing.endpoint, 'http://collector:4318/v1/traces');
  });
  it('takes a sample ratio between 0 and 1', () => {
    assert.equal(loadConfig({ ...base, SERVICE_TRACING_SAMPLE_RATIO: '0.25' }).tracing.sampleRatio, 0.25);
    assert.throws(() => loadConfig({ ...base, SERVICE_TRACING_SAMPLE_RATIO: '2' }), ConfigError);
  });
});

describe('engine image settings', () => {
  const base = { SERVICE_AUTH_ENABLED: 'false' };
  it('composes SERVICE_AGENT_CLI_IMAGE and SERVICE_AGENT_CLI_IMAGE_TAG, defaulting to the pinned engine', () => {
    assert.match(loadConfig(base).agent.engineImage, /^localhost\/berth-engine:\d+\.\d+\.\d+$/);
    assert.equal(loadConfig({ ...base, SERVICE_AGENT_CLI_IMAGE: 'registry.example/tools/claude', SERVICE_AGENT_CLI_IMAGE_TAG: '2.1.330' }).agent.engineImage, 'registry.example/tools/claude:2.1.330');
  });
  it('takes SERVICE_ENGINE_IMAGE as the whole reference, but not together with the other two', () => {
    assert.equal(loadConfig({ ...base, SERVICE_ENGINE_IMAGE: 'localhost/engine:x' }).agent.engineImage, 'localhost/engine:x');
    assert.throws(() => loadConfig({ ...base, SERVICE_ENGINE_IMAGE: 'localhost/engine:x', SERVICE_AGENT_CLI_IMAGE_TAG: 'y' }), (error: unknown) => error instanceof ConfigError && error.variable === 'SERVICE_ENGINE_IMAGE');
    assert.throws(() => loadConfig({ ...base, SERVICE_AGENT_CLI_IMAGE_TAG: 'bad tag' }), (error: unknown) => error instanceof ConfigError && error.variable === 'SERVICE_AGENT_CLI_IMAGE_TAG');
  });
  it('mounts the engine by default and pulls it only when asked', () => {
    const { agent } = loadConfig(base);
    assert.equal(agent.mountEngine, true);
    assert.equal(agent.autoPullEngine, false);
  });
});
