// SERVICE_DATABASE_URL, SERVICE_NODE_NAME, SERVICE_NODE_URL and SERVICE_NODE_LEASE (issue 26): their defaults
// (no database: the SQLite files), and invalid values stopping the start with the variable named and a
// database password never echoed.
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { redactedDatabaseUrl } from '../../src/composition/database.js';

const base = { SERVICE_AUTH_ENABLED: 'false' };

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig({ ...base, ...env });
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail(`configuration ${JSON.stringify(env)} was accepted`);
}

describe('cluster configuration', () => {
  it('defaults: no database, the node named <host>-<instance>, reached at SERVICE_ADDRESS, a 15 s lease', () => {
    const { cluster } = loadConfig({ ...base, SERVICE_INSTANCE_NAME: 'blue', SERVICE_ADDRESS: '127.0.0.1:8181' });
    assert.equal(cluster.databaseUrl, undefined);
    assert.equal(cluster.nodeName, `${hostname().split('.')[0]!.replace(/[^A-Za-z0-9_.-]/g, '-')}-blue`);
    assert.equal(cluster.nodeUrl, 'http://127.0.0.1:8181');
    assert.equal(cluster.nodeLeaseMs, 15_000);
  });

  it('a wildcard SERVICE_ADDRESS gives a node URL with the host name, an IPv6 one brackets', () => {
    assert.equal(loadConfig({ ...base, SERVICE_ADDRESS: '0.0.0.0:8080' }).cluster.nodeUrl, `http://${hostname()}:8080`);
    assert.equal(loadConfig({ ...base, SERVICE_ADDRESS: '[::1]:8080' }).cluster.nodeUrl, 'http://[::1]:8080');
  });

  it('reads every variable when set', () => {
    const { cluster } = loadConfig({
      ...base,
      SERVICE_DATABASE_URL: 'postgresql://berth:s3cret@db.internal:5432/berth?sslmode=require',
      SERVICE_NODE_NAME: 'node-1',
      SERVICE_NODE_URL: 'https://node-1.internal:8443/',
      SERVICE_NODE_LEASE: '30s',
      SERVICE_SHARED_DIR: '/mnt/berth-shared',
    });
    assert.deepEqual(cluster, {
      databaseUrl: 'postgresql://berth:s3cret@db.internal:5432/berth?sslmode=require',
      nodeName: 'node-1',
      nodeUrl: 'https://node-1.internal:8443',
      nodeLeaseMs: 30_000,
      sharedDir: '/mnt/berth-shared',
    });
  });

  for (const [env, variable, pattern] of [
    [{ SERVICE_DATABASE_URL: 'mysql://berth:hunter2secret@db/berth' }, 'SERVICE_DATABASE_URL', /postgres:\/\//],
    [{ SERVICE_DATABASE_URL: 'not a url hunter2secret' }, 'SERVICE_DATABASE_URL', /postgres:\/\//],
    [{ SERVICE_DATABASE_URL: 'postgres://berth:hunter2secret@db:5432' }, 'SERVICE_DATABASE_URL', /names no database/],
    [{ SERVICE_NODE_NAME: 'has space' }, 'SERVICE_NODE_NAME', /letters, digits/],
    [{ SERVICE_NODE_NAME: 'x'.repeat(64) }, 'SERVICE_NODE_NAME', /1-63/],
    [{ SERVICE_NODE_URL: 'node-1:8080' }, 'SERVICE_NODE_URL', /http\(s\) URL/],
    [{ SERVICE_NODE_URL: 'ftp://node-1/' }, 'SERVICE_NODE_URL', /http\(s\) URL/],
    [{ SERVICE_DATABASE_URL: 'postgres://berth:hunter2secret@db:5432/berth', SERVICE_ADDRESS: '127.0.0.1:0' }, 'SERVICE_NODE_URL', /port 0/],
    [{ SERVICE_NODE_LEASE: 'soon' }, 'SERVICE_NODE_LEASE', /duration/],
    [{ SERVICE_NODE_LEASE: '2s' }, 'SERVICE_NODE_LEASE', /minimum of 3s/],
  ] as const) {
    it(`${JSON.stringify(env)} stops the start naming ${variable}`, () => {
      const error = refusal(env);
      assert.equal(error.variable, variable);
      assert.match(error.message, pattern);
      assert.doesNotMatch(error.message, /hunter2secret/, 'a database password is never echoed');
    });
  }

  it('an invalid SERVICE_INSTANCE_NAME is still named as such, not as the node name derived from it', () => {
    assert.equal(refusal({ SERVICE_INSTANCE_NAME: 'has space' }).variable, 'SERVICE_INSTANCE_NAME');
  });

  it('the database URL is shown without its password', () => {
    assert.equal(redactedDatabaseUrl('postgres://berth:hunter2secret@db.internal:5432/berth?password=x'), 'postgres://berth@db.internal:5432/berth');
  });
});
