// The bounds issue 23 adds for what a container controls: a turn's send timeout and every container's log cap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import { logConfiguration } from '../../src/runtime/podman/container-spec.js';

const base = { SERVICE_AUTH_ENABLED: 'false' };

test('a turn waits at most 30 s for the engine by default; SERVICE_AGENT_SEND_TIMEOUT sets it', () => {
  assert.equal(loadConfig(base).agents.sendTimeoutMs, 30_000);
  assert.equal(loadConfig({ ...base, SERVICE_AGENT_SEND_TIMEOUT: '5s' }).agents.sendTimeoutMs, 5_000);
  assert.throws(() => loadConfig({ ...base, SERVICE_AGENT_SEND_TIMEOUT: 'soon' }), (error: unknown) => error instanceof ConfigError && /SERVICE_AGENT_SEND_TIMEOUT/.test(error.message));
});

test('every container log is capped at 16 MiB by default; SERVICE_CONTAINER_LOG_MAX_BYTES sets it, at least 64k', () => {
  assert.equal(loadConfig(base).agent.logMaxBytes, 16 * 1024 * 1024);
  assert.equal(loadConfig({ ...base, SERVICE_CONTAINER_LOG_MAX_BYTES: '1m' }).agent.logMaxBytes, 1024 * 1024);
  assert.throws(() => loadConfig({ ...base, SERVICE_CONTAINER_LOG_MAX_BYTES: '8k' }), (error: unknown) => error instanceof ConfigError && /SERVICE_CONTAINER_LOG_MAX_BYTES.*64k/.test(error.message));
});

test('the cap reaches Podman as a k8s-file log of that size (journald would ignore it)', () => {
  assert.deepEqual(logConfiguration(1024 * 1024), { log_configuration: { driver: 'k8s-file', size: 1024 * 1024 } });
  assert.deepEqual(logConfiguration(undefined), {});
});
