// Two real Berths on one PostgreSQL (issue 26, SERVICE_DATABASE_URL): a throw-away PostgreSQL 15
// (test/support/postgres.ts) and two nodes on real Podman, each with its own instance, node name and Podman
// service, both with authentication on and the same JWT secret. What one node records, the other serves: a
// job submitted on node A is read (and seen finishing) through node B; a workspace created on A is listed on
// B; an access token logged out on A is refused by B. Both nodes are in the nodes table with a live lease; a
// third start under node A's name is refused while A's lease is live, and changes nothing; at stop both rows
// are released. Nothing is left: containers and networks (checked by each test Berth's stop), and the
// PostgreSQL server's processes and directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeNameTakenError } from '../../src/core/cluster/node-registry.js';
import { metric, startTestBerth, type TestBerth } from '../support/berth.js';
import { ClusterCallers, clusterNodeEnv, queryDatabase, stopCluster } from '../support/cluster-nodes.js';
import { freePort, startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';

const callers = new ClusterCallers(['alice'] as const);
const FINISHED = new Set(['completed', 'failed', 'crashed', 'cancelled']);

interface NodeRow {
  name: string;
  url: string;
  expires_at: Date;
  released_at: Date | null;
  live: boolean;
}

describe('two nodes on one PostgreSQL database', () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  let a: TestBerth | undefined;
  let b: TestBerth | undefined;
  let token: string;
  let jobId: string;

  const ports = new Map<string, number>();
  // A port of its own per node name: the URL the node registers (SERVICE_NODE_URL's default) is derived from it.
  const nodeEnv = (name: string) => clusterNodeEnv(address, { name, port: ports.get(name)! }, callers);
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  async function nodeRows(): Promise<NodeRow[]> {
    return queryDatabase<NodeRow>(address, 'SELECT name, url, expires_at, released_at, expires_at > now() AS live FROM nodes ORDER BY name');
  }

  before(async () => {
    server = await startPostgres();
    address = await server.createDatabase('cluster');
    for (const name of ['node-a', 'node-b']) ports.set(name, await freePort());
    a = await startTestBerth(nodeEnv('node-a'));
    // Node B starts while node A runs a job: B's start-up must neither crash it (its container is not on B's
    // Podman) nor run it again.
    await callers.signIn(a);
    token = callers.token('alice');
    const submitted = await a.request('POST', '/run/async', { prompt: 'say: submitted on node a' }, bearer(token));
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    jobId = submitted.body.job_id as string;
    b = await startTestBerth(nodeEnv('node-b'));
  });

  after(() => stopCluster([a, b], server));

  test('both nodes are registered with live leases, shown by GET /health and /metrics; a second start under a live name is refused', async () => {
    const rows = await nodeRows();
    assert.deepEqual(rows.map((row) => [row.name, row.url, row.live, row.released_at]), [
      ['node-a', a!.url, true, null],
      ['node-b', b!.url, true, null],
    ]);
    for (const [node, name] of [[a!, 'node-a'], [b!, 'node-b']] as const) {
      const health = await node.request('GET', '/health');
      assert.equal(health.body.node, name);
      assert.deepEqual(health.body.components.find((c: { name: string }) => c.name === 'node-lease'), { name: 'node-lease', status: 'ok' });
      const left = await metric(node, `berth_node_lease_seconds_left{node="${name}"}`);
      assert.ok(left > 5 && left <= 15, `lease seconds left ${left}`);
    }

    await assert.rejects(startTestBerth(nodeEnv('node-a')), (error: unknown) => error instanceof NodeNameTakenError && error.message.includes(a!.url));
    assert.deepEqual((await nodeRows()).map((row) => [row.name, row.url, row.live]), [
      ['node-a', a!.url, true],
      ['node-b', b!.url, true],
    ], 'the refused start left node A\'s registration alone');
  });

  test('a job submitted on node A (before node B started) is read through node B and completes once; a workspace created on A is listed on B; a token logged out on A is refused by B', async () => {
    const seenOnB = await b!.request('GET', `/jobs/${jobId}`, undefined, bearer(token));
    assert.equal(seenOnB.status, 200, JSON.stringify(seenOnB.body));
    assert.equal(seenOnB.body.id ?? seenOnB.body.job_id, jobId);
    const finished = await waitFor('the job to finish, as node B reads it', async () => {
      const job = await b!.request('GET', `/jobs/${jobId}`, undefined, bearer(token));
      return FINISHED.has(job.body.status) ? job.body : undefined;
    }, 90_000, 250);
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    const listedOnB = await b!.request('GET', '/jobs', undefined, bearer(token));
    assert.ok(listedOnB.body.jobs.some((job: { id?: string; job_id?: string }) => (job.id ?? job.job_id) === jobId), JSON.stringify(listedOnB.body));

    const created = await a!.request('POST', '/workspaces', {}, bearer(token));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const workspaces = await b!.request('GET', '/workspaces', undefined, bearer(token));
    assert.equal(workspaces.status, 200, JSON.stringify(workspaces.body));
    assert.ok(workspaces.body.workspaces.some((ws: { id: string }) => ws.id === created.body.id), JSON.stringify(workspaces.body));
    assert.equal((await a!.request('DELETE', `/workspaces/${created.body.id}`, undefined, bearer(token))).status, 200);

    assert.equal((await b!.request('GET', '/jobs', undefined, bearer(token))).status, 200, 'node B accepts the token before the logout');
    const logout = await a!.request('POST', '/auth/logout', undefined, bearer(token));
    assert.equal(logout.status, 200, JSON.stringify(logout.body));
    const refused = await b!.request('GET', '/jobs', undefined, bearer(token));
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
    assert.match(refused.body.error, /blacklisted/);
  });

  test('at stop each node releases its lease: both rows stay, released, none live', async () => {
    await a!.stop();
    await b!.stop();
    const rows = await nodeRows();
    assert.deepEqual(rows.map((row) => [row.name, row.live, row.released_at !== null]), [
      ['node-a', false, true],
      ['node-b', false, true],
    ]);
  });
});
