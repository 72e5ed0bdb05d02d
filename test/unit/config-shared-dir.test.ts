// SERVICE_SHARED_DIR (issue 26): unset by default; an absolute path, and only with SERVICE_DATABASE_URL. That the
// directory exists and can be written is checked at start (SharedWorkspaceCopies.open, workspace-copies.test.ts).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';

const BASE = { SERVICE_AUTH_ENABLED: 'false' };
const DATABASE = { ...BASE, SERVICE_DATABASE_URL: 'postgres://berth:secret@db.example:5432/berth', SERVICE_ADDRESS: '127.0.0.1:8181' };

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig({ ...BASE, ...env });
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error;
  }
  assert.fail('the configuration was accepted');
}

it('is unset by default, with or without a database', () => {
  assert.equal(loadConfig(BASE).cluster.sharedDir, undefined);
  assert.equal(loadConfig(DATABASE).cluster.sharedDir, undefined);
});

it('takes an absolute path with a database', () => {
  assert.equal(loadConfig({ ...DATABASE, SERVICE_SHARED_DIR: '/mnt/berth-shared' }).cluster.sharedDir, '/mnt/berth-shared');
});

it('refuses a relative path and a use without a database, naming the variable', () => {
  const relative = refusal({ ...DATABASE, SERVICE_SHARED_DIR: 'shared' });
  assert.match(relative.message, /SERVICE_SHARED_DIR/);
  assert.match(relative.message, /not an absolute path/);
  const alone = refusal({ SERVICE_SHARED_DIR: '/mnt/berth-shared' });
  assert.match(alone.message, /SERVICE_SHARED_DIR/);
  assert.match(alone.message, /needs SERVICE_DATABASE_URL/);
});
