// The PostgreSQL stores (issue 26) on a real, throw-away PostgreSQL 15 server (test/support/postgres.ts): every
// store contract the SQLite stores pass, a database per suite and a fresh schema per test; the migration runner, nodes starting at
// once included; and what only a shared database promises: two nodes (two pools) see one state, race on one
// job with one winner, and a restart keeps everything. The server is stopped at the end and nothing of it left.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { PostgresAgentStore } from '../../src/store/agents/postgres-agent-store.js';
import { PostgresBlacklist } from '../../src/store/blacklist/postgres-blacklist.js';
import { PostgresEventLog } from '../../src/store/events/postgres-event-log.js';
import { PostgresJobStore } from '../../src/store/jobs/postgres-job-store.js';
import { PostgresDatabase } from '../../src/store/postgres/database.js';
import { applyPostgresMigrations } from '../../src/store/postgres/migrate.js';
import { PostgresGrantStore } from '../../src/store/gateway/postgres-grant-store.js';
import { PostgresUsageStore } from '../../src/store/usage/postgres-usage-store.js';
import { PostgresSessionRecordStore } from '../../src/store/sessions/postgres-session-record-store.js';
import { PostgresWorkspaceStore } from '../../src/store/workspaces/postgres-workspace-store.js';
import { T0, agentRecord, agentStoreContract } from '../support/agent-store-contract.js';
import { blacklistContract } from '../support/blacklist-contract.js';
import { eventLogContract } from '../support/event-log-contract.js';
import { jobStoreContract, newJob } from '../support/job-store-contract.js';
import { grantRow, grantStoreContract } from '../support/grant-store-contract.js';
import { usageStoreContract } from '../support/usage-store-contract.js';
import { sessionRecordStoreContract } from '../support/session-record-store-contract.js';
import { startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { workspaceRecord, workspaceStoreContract } from '../support/workspace-store-contract.js';

let server: TestPostgres;
const opened: PostgresDatabase[] = [];
const migrationDirs = mkdtempSync(join(tmpdir(), 'berth-pg-migrations-'));

before(async () => {
  server = await startPostgres();
});

after(async () => {
  await Promise.all(opened.map((database) => database.close()));
  await server.stop();
  rmSync(migrationDirs, { recursive: true, force: true });
  assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
});

/** A pool on `address`, as one node opens it; closed at the end of the file at the latest. */
function connect(address: PostgresDatabaseAddress, connection: PostgresDatabaseAddress['config'] | string = address.config): PostgresDatabase {
  const database = new PostgresDatabase({ connection, maxConnections: 12 });
  opened.push(database);
  return database;
}

/**
 * An empty place for one test: a schema of its own (search_path names it, so the stores' unqualified tables and
 * schema_migrations land there) in its suite's database, created on the suite's first call. A schema costs
 * under a millisecond where CREATE DATABASE costs about 80.
 */
function freshDatabaseFor(suite: string): (() => Promise<PostgresDatabase>) & { again(): Promise<PostgresDatabase> } {
  let address: Promise<PostgresDatabaseAddress> | undefined;
  let schemas = 0;
  const inSchema = async (schema: string) => connect(await address!, { ...(await address!).config, options: `-c search_path=${schema}` });
  const fresh = async () => {
    address ??= server.createDatabase(suite);
    const schema = `test_${(schemas += 1)}`;
    const database = await inSchema(schema);
    await database.query(`CREATE SCHEMA ${schema}`);
    return database;
  };
  /** A new pool on the last fresh schema: what a restarted node finds. */
  const again = async () => inSchema(`test_${schemas}`);
  return Object.assign(fresh, { again });
}

/** The store closes the pool it was opened on too: each contract test has a database and a pool of its own. */
function closingItsPool<S extends { close(): unknown }>(store: S, database: PostgresDatabase): S {
  const close = store.close.bind(store);
  (store as { close(): unknown }).close = () => {
    const closed = close();
    void database.close();
    return closed;
  };
  return store;
}

const jobsDatabase = freshDatabaseFor('jobs');
jobStoreContract('postgres', async () => {
  const database = await jobsDatabase();
  return closingItsPool(await PostgresJobStore.open(database, 'node-a'), database);
});
const blacklistDatabase = freshDatabaseFor('blacklist');
blacklistContract('postgres', async () => {
  const database = await blacklistDatabase();
  return closingItsPool(await PostgresBlacklist.open(database), database);
});
const workspacesDatabase = freshDatabaseFor('workspaces');
workspaceStoreContract('postgres', async () => {
  const database = await workspacesDatabase();
  return closingItsPool(await PostgresWorkspaceStore.open(database), database);
});
const sessionsDatabase = freshDatabaseFor('sessions');
sessionRecordStoreContract('postgres', async () => {
  const database = await sessionsDatabase();
  return closingItsPool(await PostgresSessionRecordStore.open(database), database);
});
const eventsDatabase = freshDatabaseFor('events');
eventLogContract('postgres', async (retention) => {
  const database = await eventsDatabase();
  return closingItsPool(await PostgresEventLog.open(database, retention), database);
});

const usageDatabase = freshDatabaseFor('usage');
usageStoreContract('postgres', {
  async open(now) {
    const database = await usageDatabase();
    return closingItsPool(await PostgresUsageStore.open(database, now), database);
  },
  async reopen(now) {
    const database = await usageDatabase.again();
    return closingItsPool(await PostgresUsageStore.open(database, now), database);
  },
});

const grantsDatabase = freshDatabaseFor('grants');
grantStoreContract('postgres', {
  async open() {
    const database = await grantsDatabase();
    return closingItsPool(await PostgresGrantStore.open(database, 'node-a'), database);
  },
  async reopen() {
    const database = await grantsDatabase.again();
    return closingItsPool(await PostgresGrantStore.open(database, 'node-a'), database);
  },
});

describe('PostgresGrantStore on one database for several nodes', () => {
  it('keeps each node\'s grants apart: a node revoking everything at its start leaves the others\' alone', async () => {
    const database = await grantsDatabase();
    const [a, b] = await Promise.all([PostgresGrantStore.open(database, 'node-a'), PostgresGrantStore.open(database, 'node-b')]);
    await a.put(grantRow(1));
    await b.put(grantRow(2));
    // The same run id on two nodes (never in practice: ids are UUIDs) is two grants.
    await b.put(grantRow(3, { runId: 'run-1' }));
    await b.setHolder('run-1', '{"kind":"run"}');
    assert.deepEqual(await a.all(), [grantRow(1)]);
    await a.remove('run-1');
    assert.deepEqual(await b.all(), [grantRow(2), grantRow(3, { runId: 'run-1', holder: '{"kind":"run"}' })]);
    await assert.rejects(PostgresGrantStore.open(database, ''), /needs the name of the node/);
    await Promise.all([a.close(), b.close()]);
  });
});

const agentsDatabase = freshDatabaseFor('agents');
agentStoreContract('postgres', {
  async open() {
    const database = await agentsDatabase();
    return closingItsPool(await PostgresAgentStore.open(database, 'node-a'), database);
  },
  async reopen() {
    const database = await agentsDatabase.again();
    return closingItsPool(await PostgresAgentStore.open(database, 'node-a'), database);
  },
});

describe('PostgresAgentStore on one database for several nodes', () => {
  it('keeps each node\'s agents apart: a node\'s start finds only its own, and forgets only its own', async () => {
    const database = await agentsDatabase();
    const [a, b] = await Promise.all([PostgresAgentStore.open(database, 'node-a'), PostgresAgentStore.open(database, 'node-b')]);
    const exited = { status: 'exited' as const, exitedAt: T0 };
    await a.insert(agentRecord(1));
    await a.insert(agentRecord(2, exited));
    await b.insert(agentRecord(3));
    await b.insert(agentRecord(4, exited));
    assert.deepEqual((await a.live()).map((agent) => agent.id), ['agent-1']);
    assert.deepEqual((await b.exited()).map((agent) => agent.id), ['agent-4']);
    // Another node's agent is neither updated, removed nor pruned from here.
    await a.update('agent-3', { status: 'exited', currentTurn: null, turnsCompleted: 0, turnsEnded: 0, exitError: 'not yours', lastActivityAt: T0, exitedAt: T0 });
    await a.remove('agent-4');
    assert.equal(await a.removeExitedBefore('2031-01-01T00:00:00.000Z'), 1);
    assert.deepEqual(await b.live(), [agentRecord(3)]);
    assert.deepEqual((await b.exited()).map((agent) => agent.id), ['agent-4']);
    // Ids are unique across nodes: an agent id names one agent in the cluster.
    await assert.rejects(b.insert(agentRecord(1)));
    await assert.rejects(PostgresAgentStore.open(database, ''), /needs the name of the node/);
    await Promise.all([a.close(), b.close()]);
  });
});

describe('applyPostgresMigrations', () => {
  const freshDatabase = freshDatabaseFor('migrations');
  let counter = 0;
  function migrationsDir(files: Record<string, string>): URL {
    const folder = join(migrationDirs, `set-${(counter += 1)}`);
    mkdirSync(folder);
    for (const [name, sql] of Object.entries(files)) writeFileSync(join(folder, name), sql);
    return pathToFileURL(`${folder}/`);
  }

  it('applies pending migrations in number order, once, recorded per store', async () => {
    const database = await freshDatabase();
    const migrations = migrationsDir({
      '002_add_b.sql': 'ALTER TABLE t ADD COLUMN b TEXT;',
      '001_create_t.sql': 'CREATE TABLE t (a TEXT);\nCREATE INDEX t_a ON t (a);',
      'README.md': 'not a migration',
    });
    assert.deepEqual(await applyPostgresMigrations(database, 'first', migrations), [1, 2]);
    assert.deepEqual(await applyPostgresMigrations(database, 'first', migrations), []);
    await database.query('INSERT INTO t (a, b) VALUES ($1, $2)', ['x', 'y']);
    // Another store's migrations are its own, even with the same numbers.
    assert.deepEqual(await applyPostgresMigrations(database, 'second', migrationsDir({ '001_create_u.sql': 'CREATE TABLE u (a TEXT);' })), [1]);
    assert.deepEqual(
      await database.query('SELECT store, version, name FROM schema_migrations ORDER BY store, version'),
      [{ store: 'first', version: 1, name: 'create_t' }, { store: 'first', version: 2, name: 'add_b' }, { store: 'second', version: 1, name: 'create_u' }],
    );
  });

  it('applies only the migrations added since the last run', async () => {
    const database = await freshDatabase();
    const folder = migrationsDir({ '001_create_t.sql': 'CREATE TABLE t (a TEXT);' });
    await applyPostgresMigrations(database, 'store', folder);
    writeFileSync(new URL('010_add_c.sql', folder), 'ALTER TABLE t ADD COLUMN c TEXT;');
    assert.deepEqual(await applyPostgresMigrations(database, 'store', folder), [10]);
  });

  it('rolls back a failing migration together with its record, and names it', async () => {
    const database = await freshDatabase();
    const migrations = migrationsDir({
      '001_create_t.sql': 'CREATE TABLE t (a TEXT);',
      '002_broken.sql': 'CREATE TABLE u (a TEXT);\nTHIS IS NOT SQL;',
    });
    await assert.rejects(applyPostgresMigrations(database, 'store', migrations), /migration store 2_broken failed: syntax error/);
    assert.deepEqual(await database.query('SELECT version FROM schema_migrations'), [{ version: 1 }]);
    assert.deepEqual(await database.query("SELECT to_regclass('u') AS u"), [{ u: null }]);
    // The lock went with the failure: the next start is not blocked.
    writeFileSync(new URL('002_broken.sql', migrations), 'CREATE TABLE u (a TEXT);');
    assert.deepEqual(await applyPostgresMigrations(database, 'store', migrations), [2]);
  });

  it('applies each migration once when several nodes start at the same moment', async () => {
    const address = await server.createDatabase('starters');
    // Not idempotent on purpose: a second run of 001 fails (the table exists), of 002 adds a second row.
    const migrations = migrationsDir({
      '001_create_t.sql': 'CREATE TABLE t (a INTEGER); SELECT pg_sleep(0.2);',
      '002_seed.sql': 'INSERT INTO t VALUES (1);',
    });
    const nodes = Array.from({ length: 6 }, () => connect(address));
    const applied = await Promise.all(nodes.map((node) => applyPostgresMigrations(node, 'store', migrations)));
    assert.deepEqual(applied.flat().sort(), [1, 2], `each version applied by exactly one node: ${JSON.stringify(applied)}`);
    assert.deepEqual(await nodes[0]!.query('SELECT a FROM t'), [{ a: 1 }]);
    assert.deepEqual(await nodes[0]!.query('SELECT count(*) AS n FROM schema_migrations'), [{ n: 2 }]);
  });
});

describe('PostgresDatabase', () => {
  const freshDatabase = freshDatabaseFor('pool');
  it('rolls a transaction back when its body fails, and keeps the pool usable', async () => {
    const database = await freshDatabase();
    await database.query('CREATE TABLE t (a INTEGER PRIMARY KEY)');
    await assert.rejects(
      database.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (1)');
        await tx.query('INSERT INTO t VALUES (1)');
      }),
      /duplicate key/,
    );
    assert.deepEqual(await database.query('SELECT a FROM t'), []);
    assert.deepEqual(await database.transaction((tx) => tx.query('INSERT INTO t VALUES (2) RETURNING a')), [{ a: 2 }]);
    assert.deepEqual(await database.query('SELECT a FROM t'), [{ a: 2 }]);
  });

  it('answers bigints as numbers, and refuses one beyond the safe integers', async () => {
    const database = await freshDatabase();
    assert.deepEqual(await database.query('SELECT 9007199254740991::bigint AS n, count(*) AS c FROM (VALUES (1), (2)) AS v'), [{ n: 9007199254740991, c: 2 }]);
    await assert.rejects(database.query('SELECT 9007199254740993::bigint AS n'), /beyond JavaScript's safe integers/);
  });

  it('connects with a postgres:// URL (TCP, password)', async () => {
    const address = await server.createDatabase('url');
    const database = connect(address, address.url);
    assert.deepEqual(await database.query('SELECT current_database() AS name'), [{ name: address.name }]);
  });
});

describe('PostgreSQL stores shared by several nodes', () => {
  const T1 = '2030-01-01T00:00:01.000Z';
  const retention = { maxPerStream: 1_000, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 };

  async function twoNodes() {
    const address = await server.createDatabase('nodes');
    const open = async (database: PostgresDatabase, node = 'node-a') => {
      const [jobs, blacklist, workspaces, events] = await Promise.all([
        PostgresJobStore.open(database, node), PostgresBlacklist.open(database), PostgresWorkspaceStore.open(database), PostgresEventLog.open(database, retention),
      ]);
      return { database, jobs, blacklist, workspaces, events };
    };
    // Both nodes open all their stores at once: the migrations serialize on the advisory lock.
    const [a, b] = await Promise.all([open(connect(address), 'node-a'), open(connect(address), 'node-b')]);
    return { address, a: a!, b: b!, open };
  }

  it('one node sees what the other wrote, in every store', async () => {
    const { a, b } = await twoNodes();
    await a.jobs.insert(newJob(1));
    assert.equal((await b.jobs.get('job-1'))?.status, 'pending');
    await a.blacklist.add('logged-out-on-a', Date.now() + 60_000);
    assert.equal(await b.blacklist.has('logged-out-on-a'), true, 'a token logged out through one node is refused by all');
    await a.workspaces.insert(workspaceRecord(1));
    await a.workspaces.link({ sessionId: 's-1', workspaceId: workspaceRecord(1).id, owned: true });
    assert.deepEqual(await b.workspaces.linkOf('s-1'), { sessionId: 's-1', workspaceId: workspaceRecord(1).id, owned: true });
    const first = await a.events.append('agent:x', 'output', { n: 1 }, 1_000);
    const second = await b.events.append('agent:y', 'output', { n: 2 }, 1_001);
    assert.ok(second.id > first.id, 'ids grow across nodes');
    assert.deepEqual((await b.events.after('agent:x', 0)).events, [first]);
  });

  it('every node reads and changes every job; a node\'s start-up lists only its own jobs: pending ones it accepted, running ones it runs, webhooks it owes', async () => {
    const { a, b } = await twoNodes();
    await a.jobs.insert(newJob(1));
    await a.jobs.insert(newJob(2));
    await b.jobs.insert(newJob(3));
    await a.jobs.transition('job-2', ['pending'], { status: 'running' }, T1);
    assert.deepEqual((await a.jobs.withStatus('pending')).map((job) => job.id), ['job-1']);
    assert.deepEqual((await b.jobs.withStatus('pending')).map((job) => job.id), ['job-3'], 'node B would not run node A\'s pending job again');
    assert.deepEqual((await b.jobs.withStatus('running')).map((job) => job.id), [], 'nor crash its running one');
    assert.equal((await b.jobs.transition('job-1', ['pending'], { status: 'cancelled' }, T1))?.status, 'cancelled', 'but changes it when asked');
    assert.equal((await b.jobs.get('job-2'))?.status, 'running');
    await a.jobs.insert(newJob(4, { webhookUrl: 'https://example.com/hook' }));
    await b.jobs.transition('job-4', ['pending'], { status: 'completed' }, T1);
    // The node that finished a job owes its webhook (it sends it at once; its next start again if it did not end).
    assert.deepEqual((await b.jobs.pendingWebhooks()).map((job) => job.id), ['job-4'], 'node B, which finished the job, delivers its webhook');
    assert.deepEqual(await a.jobs.pendingWebhooks(), [], 'node A, which accepted it, does not deliver it a second time');
  });

  it('of nodes claiming one pending job at once, exactly one wins', async () => {
    const { a, b } = await twoNodes();
    for (let n = 1; n <= 20; n += 1) await a.jobs.insert(newJob(n));
    const claims = await Promise.all(
      Array.from({ length: 20 }, (_, i) => i + 1).flatMap((n) => [
        a.jobs.transition(`job-${n}`, ['pending'], { status: 'running', output: 'a' }, T1),
        b.jobs.transition(`job-${n}`, ['pending'], { status: 'running', output: 'b' }, T1),
      ]),
    );
    for (let n = 0; n < 20; n += 1) {
      const won = [claims[2 * n], claims[2 * n + 1]].filter((job) => job !== undefined);
      assert.equal(won.length, 1, `job-${n + 1}: one winner`);
      assert.equal((await a.jobs.get(`job-${n + 1}`))?.output, won[0]!.output);
    }
  });

  it('nodes pruning the event log at once neither deadlock nor lose the count', async () => {
    const address = await server.createDatabase('prune');
    const small = { maxPerStream: 3, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 };
    const [a, b] = await Promise.all([PostgresEventLog.open(connect(address), small), PostgresEventLog.open(connect(address), small)]);
    for (let i = 0; i < 10; i += 1) {
      await Promise.all(Array.from({ length: 8 }, (_, s) => (s % 2 === 0 ? a : b).append(`agent:${s}`, 'output', { i }, 1_000 + i)));
    }
    await Promise.all([a.prune(2_000), b.prune(2_000), a.removeStream('agent:7'), b.prune(2_000)]);
    for (let s = 0; s < 7; s += 1) {
      const kept = await a.after(`agent:${s}`, 0);
      assert.deepEqual(kept.events.map((event) => event.data['i']), [7, 8, 9], `agent:${s}`);
      assert.ok(kept.lostThrough !== undefined && kept.lostThrough < kept.events[0]!.id);
    }
    assert.deepEqual(await b.after('agent:7', 0), { events: [], lostThrough: undefined });
  });

  it('a restarted node finds every record, and a closed store leaves the others working', async () => {
    const { address, a, b, open } = await twoNodes();
    await a.jobs.insert(newJob(1));
    await a.blacklist.add('jti', Date.now() + 60_000);
    await a.workspaces.insert(workspaceRecord(1));
    const event = await a.events.append('job:job-1', 'status', { status: 'pending' }, 1_000);
    await a.blacklist.close();
    await assert.rejects(a.blacklist.has('jti'), /blacklist store is closed/);
    assert.equal((await a.jobs.get('job-1'))?.id, 'job-1', 'the pool stays open for the other stores');
    await Promise.all([a.jobs.close(), a.events.close()]);
    a.workspaces.close();
    await a.database.close();

    const restarted = await open(connect(address));
    assert.equal((await restarted.jobs.get('job-1'))?.status, 'pending');
    assert.equal(await restarted.blacklist.has('jti'), true);
    assert.equal((await restarted.workspaces.get(workspaceRecord(1).id))?.owner, 'caller-a');
    assert.deepEqual((await restarted.events.after('job:job-1', 0)).events, [event]);
    assert.ok((await restarted.events.append('job:job-1', 'status', {}, 2_000)).id > event.id);
    assert.deepEqual(await b.database.query("SELECT DISTINCT store FROM schema_migrations ORDER BY store"), [
      { store: 'blacklist' }, { store: 'events' }, { store: 'jobs' }, { store: 'workspaces' },
    ]);
  });
});
