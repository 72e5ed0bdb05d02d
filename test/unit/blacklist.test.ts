import { AuthService } from '../../src/core/auth/auth-service.js';
import { parseApiTokens } from '../../src/api-tokens.js';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import { TokenService } from '../../src/core/auth/tokens.js';
import { registerErrorHandler } from '../../src/http/error-handler.js';
import { registerAuth } from '../../src/http/plugins/auth.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { createBlacklist } from '../../src/store/blacklist/create-blacklist.js';
import { MemoryBlacklist } from '../../src/store/blacklist/memory-blacklist.js';
import { SqliteBlacklist } from '../../src/store/blacklist/sqlite-blacklist.js';
import { applyMigrations } from '../../src/store/migrate.js';
import { blacklistContract } from '../support/blacklist-contract.js';

// The API token whose identity ('c') the tokens below carry.
const API_TOKENS = parseApiTokens(['c:k3Vq9ZpX2mLw7RtY-c']);

const dir = mkdtempSync(join(tmpdir(), 'berth-blacklist-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;
const freshPath = () => join(dir, `blacklist-${(fileCounter += 1)}.db`);

// One suite, every backend (the PostgreSQL run is in postgres-stores.test.ts).
blacklistContract('memory', () => new MemoryBlacklist());
blacklistContract('bolt (sqlite)', () => new SqliteBlacklist(freshPath()));

describe('SqliteBlacklist', () => {
  it('survives close and reopen of the same file', async () => {
    const path = freshPath();
    const first = new SqliteBlacklist(path);
    await first.add('logged-out', Date.now() + 60_000);
    await first.close();
    const second = new SqliteBlacklist(path);
    assert.equal(await second.has('logged-out'), true);
    assert.equal(await second.has('other'), false);
    await second.close();
  });

  it('creates the parent folder and uses WAL journaling', async () => {
    const path = join(dir, 'a', 'b', 'blacklist.db');
    const blacklist = new SqliteBlacklist(path);
    await blacklist.add('x', 1);
    await blacklist.close();
    const db = new Database(path, { readonly: true });
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    db.close();
  });

  it('records its schema version in schema_migrations', async () => {
    const path = freshPath();
    await new SqliteBlacklist(path).close();
    await new SqliteBlacklist(path).close();
    const db = new Database(path, { readonly: true });
    assert.deepEqual(db.prepare('SELECT version, name FROM schema_migrations').all(), [{ version: 1, name: 'create_blacklist' }]);
    db.close();
  });

  it('refuses to open a file that is not a SQLite database', () => {
    const path = freshPath();
    writeFileSync(path, 'this is not a database, just some text that is long enough to have a header');
    assert.throws(() => new SqliteBlacklist(path));
  });
});

describe('applyMigrations', () => {
  function migrationsDir(files: Record<string, string>): URL {
    const folder = join(dir, `migrations-${(fileCounter += 1)}`);
    mkdirSync(folder);
    for (const [name, sql] of Object.entries(files)) writeFileSync(join(folder, name), sql);
    return pathToFileURL(`${folder}/`);
  }

  it('applies pending migrations in number order, once', () => {
    const migrations = migrationsDir({
      '002_add_b.sql': 'ALTER TABLE t ADD COLUMN b TEXT;',
      '001_create_t.sql': 'CREATE TABLE t (a TEXT);',
      'README.md': 'not a migration',
    });
    const db = new Database(':memory:');
    assert.deepEqual(applyMigrations(db, migrations), [1, 2]);
    assert.deepEqual(applyMigrations(db, migrations), []);
    db.prepare('INSERT INTO t (a, b) VALUES (?, ?)').run('x', 'y');
    db.close();
  });

  it('applies only the migrations added since the last run', () => {
    const folder = migrationsDir({ '001_create_t.sql': 'CREATE TABLE t (a TEXT);' });
    const db = new Database(':memory:');
    applyMigrations(db, folder);
    writeFileSync(new URL('010_add_c.sql', folder), 'ALTER TABLE t ADD COLUMN c TEXT;');
    assert.deepEqual(applyMigrations(db, folder), [10]);
    db.close();
  });

  it('rolls back a failing migration together with its record', () => {
    const migrations = migrationsDir({
      '001_create_t.sql': 'CREATE TABLE t (a TEXT);',
      '002_broken.sql': 'CREATE TABLE u (a TEXT); THIS IS NOT SQL;',
    });
    const db = new Database(':memory:');
    assert.throws(() => applyMigrations(db, migrations));
    assert.deepEqual(db.prepare('SELECT version FROM schema_migrations').all(), [{ version: 1 }]);
    assert.equal(db.prepare("SELECT name FROM sqlite_master WHERE name = 'u'").get(), undefined);
    db.close();
  });

  it('refuses two migrations with the same number', () => {
    const migrations = migrationsDir({ '001_a.sql': 'SELECT 1;', '1_b.sql': 'SELECT 1;' });
    const db = new Database(':memory:');
    assert.throws(() => applyMigrations(db, migrations), /version 1 appears twice/);
    db.close();
  });
});

describe('createBlacklist', () => {
  const base = { blacklistBoltPath: join(dir, 'factory.db'), blacklistCleanupIntervalMs: 20 };

  it('builds the memory backend by default configuration', async () => {
    const blacklist = createBlacklist({ ...base, blacklistBackend: 'memory' });
    await blacklist.add('a', Date.now() + 1000);
    assert.equal(await blacklist.has('a'), true);
    await blacklist.close();
    assert.equal(existsSync(base.blacklistBoltPath), false);
  });

  it('builds the bolt backend as a file at the configured path', async () => {
    const blacklist = createBlacklist({ ...base, blacklistBackend: 'bolt' });
    await blacklist.add('a', Date.now() + 1000);
    await blacklist.close();
    assert.equal(existsSync(base.blacklistBoltPath), true);
  });

  it('removes expired entries every cleanup interval', async () => {
    let now = 1_000;
    const blacklist = createBlacklist({ ...base, blacklistBackend: 'memory' }, { now: () => now });
    await blacklist.add('expires-soon', 2_000);
    await blacklist.add('expires-late', 10_000);
    now = 5_000;
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.equal(await blacklist.has('expires-soon'), false);
    assert.equal(await blacklist.has('expires-late'), true);
    await blacklist.close();
  });

  it('stops its cleanup timer on close', async () => {
    let sweeps = 0;
    const blacklist = createBlacklist({ ...base, blacklistBackend: 'memory' }, {
      now: () => {
        sweeps += 1;
        return 0;
      },
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await blacklist.close();
    const atClose = sweeps;
    assert.ok(atClose >= 1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(sweeps, atClose);
  });
});

describe('failing closed', () => {
  class ThrowingBlacklist extends MemoryBlacklist {
    override async has(): Promise<boolean> {
      throw new Error('disk I/O error');
    }
  }

  it('refuses the request with 503 when the backend throws, and never runs the handler', async () => {
    const tokens = new TokenService({ secret: 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%', accessTtlMs: 60_000, refreshTtlMs: 120_000 });
    const metrics = createMetrics();
    const app = Fastify();
    registerErrorHandler(app);
    registerAuth(app, { enabled: true, auth: new AuthService({ tokens, blacklist: new ThrowingBlacklist(), apiTokens: API_TOKENS, log: { error: () => undefined } }), metrics });
    let handled = 0;
    app.get('/jobs', async () => {
      handled += 1;
      return { jobs: [] };
    });
    const pair = await tokens.issuePair({ sub: 'c', client_id: 'test-client', atf: API_TOKENS[0]!.fingerprint });
    const response = await app.inject({ method: 'GET', url: '/jobs', headers: { authorization: `Bearer ${pair.access_token}` } });
    assert.equal(response.statusCode, 503);
    assert.deepEqual(response.json(), {
      error: 'token blacklist unavailable: the blacklist backend failed; the request was refused, retry later',
      status: 'error',
    });
    assert.equal(handled, 0);
    const counted = (await metrics.authFailures.get()).values.find((v) => v.labels.reason === 'blacklist_unavailable');
    assert.equal(counted?.value, 1);
  });

  it('refuses the request with 503 when a closed bolt backend is consulted', async () => {
    const tokens = new TokenService({ secret: 'tK9#vQ2$wX7!mN4@pL6&rS8*uZ1^yB3%', accessTtlMs: 60_000, refreshTtlMs: 120_000 });
    const blacklist = new SqliteBlacklist(freshPath());
    await blacklist.close();
    const app = Fastify();
    registerErrorHandler(app);
    registerAuth(app, { enabled: true, auth: new AuthService({ tokens, blacklist, apiTokens: API_TOKENS, log: { error: () => undefined } }), metrics: createMetrics() });
    app.get('/jobs', async () => ({ jobs: [] }));
    const pair = await tokens.issuePair({ sub: 'c', client_id: 'test-client', atf: API_TOKENS[0]!.fingerprint });
    const response = await app.inject({ method: 'GET', url: '/jobs', headers: { authorization: `Bearer ${pair.access_token}` } });
    assert.equal(response.statusCode, 503);
  });
});
