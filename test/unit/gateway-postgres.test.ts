// The model gateway on PostgreSQL stores (issue 26), on real sockets and a real, throw-away PostgreSQL 15
// (test/support/postgres.ts): the real gateway, RunGrants over PostgresGrantStore, Budgets over
// PostgresUsageStore, the offline model upstream. What an engine (code in a container) tries against it: a
// restart of the node does not reset a spent daily budget nor lose a live run's credential, and a request whose
// body names a model with a NUL in it, which PostgreSQL's text cannot hold, is still recorded and counted.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Budgets } from '../../src/core/gateway/budgets.js';
import { RunGrants } from '../../src/core/gateway/run-grants.js';
import { startGateway, type GatewayHandle } from '../../src/gateway/gateway-server.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { PostgresGrantStore } from '../../src/store/gateway/postgres-grant-store.js';
import { PostgresDatabase } from '../../src/store/postgres/database.js';
import { PostgresUsageStore } from '../../src/store/usage/postgres-usage-store.js';
import { utcDay } from '../../src/store/usage/usage-store.js';
import { startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';

let server: TestPostgres;
let address: PostgresDatabaseAddress;
let model: OfflineModel;
const key = `sk-test-${randomBytes(8).toString('hex')}`;

before(async () => {
  server = await startPostgres();
  address = await server.createDatabase('gateway');
  model = await startOfflineModel({ host: '127.0.0.1', port: 0, apiKey: key });
});

after(async () => {
  await model.close();
  await server.stop();
  assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
});

/** One node's gateway on the shared database, as the composition root would build it. */
async function startNode(tokensPerDay: number) {
  const database = new PostgresDatabase({ connection: address.config });
  const usage = await PostgresUsageStore.open(database);
  const grantStore = await PostgresGrantStore.open(database, 'node-a');
  const grants = await RunGrants.open(grantStore);
  const budgets = await Budgets.open({ tokensPerDay }, usage);
  const gateway: GatewayHandle = await startGateway({
    host: '127.0.0.1',
    port: 0,
    upstream: { baseUrl: model.url, credential: { kind: 'api_key', value: key } },
    grants,
    budgets,
    usage: budgets.recorder(usage),
    onBudgetRefusal: () => undefined,
    metrics: createMetrics(),
    log: () => undefined,
  });
  return {
    grants,
    usage,
    async post(token: string, modelName: string): Promise<number> {
      const answer = await fetch(`http://127.0.0.1:${gateway.port}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: modelName, max_tokens: 32_000, messages: [{ role: 'user', content: 'say: hello' }] }),
      });
      await answer.arrayBuffer();
      return answer.status;
    },
    /** A restart's end of this node: the gateway closed, the queued writes drained, the stores and the pool closed. */
    async stop() {
      await gateway.close();
      await grants.flush();
      await Promise.all([usage.close(), grantStore.close()]);
      await database.close();
    },
  };
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('timed out');
}

test('a restart of the node neither resets a spent daily budget nor loses a live run\'s credential; a NUL in a model name is recorded', async () => {
  const today = utcDay(Date.now());
  const first = await startNode(1);
  const token = first.grants.issue('run-attack');
  first.grants.bind('run-attack', { kind: 'run', runId: 'run-attack', caller: 'mallory', policy: { mode: 'none' } });
  assert.equal(await first.post(token, 'claude-sonnet-4-5'), 200);
  const spent = await until(() => first.usage.callerDay('mallory', today), (totals) => totals.requests === 1);
  assert.ok(spent.tokens.input_tokens > 0, 'the answer\'s tokens were counted');
  await first.stop();

  const second = await startNode(1);
  try {
    // The credential of the run that outlived the restart works, and the day's total came back from the database.
    const status = await second.post(token, 'claude-sonnet-4-5\u0000free');
    assert.equal(status, 403, 'the spent budget still refuses after the restart');
    const requests = await until(() => second.usage.requestsOf('mallory', 'run-attack', 10), (rows) => rows.length === 2);
    assert.deepEqual(requests.map((request) => [request.status, request.model, request.refusal?.limit]), [
      [200, 'claude-sonnet-4-5', undefined],
      [403, 'claude-sonnet-4-5\u0000free', 'caller_tokens_per_day'],
    ]);
    assert.equal((await second.usage.callerDay('mallory', today)).requests, 2);
  } finally {
    await second.stop();
  }
});
