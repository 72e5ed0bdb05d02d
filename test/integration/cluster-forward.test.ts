// Any node, any request (issue 26): two real Berths (own instances, Podman services and node names, one JWT
// secret) on one throw-away PostgreSQL 15. An agent runs on node A; every request for it that reaches node B is
// forwarded to A (http/plugins/forward.ts), SSE included, and the attacks on that path fail:
// - a caller drives its agent on A entirely through B (read, send, stream, list, stop);
// - another caller gets through B exactly what A answers it (404): forwarding leaks no ownership;
// - a forged X-Berth-Forwarded-From neither bypasses authentication (no token: 401 on both nodes; another
//   caller's token: 404 on the owner) nor makes B act as the owner;
// - a forwarding loop is impossible (a node registered with B's own URL: B forwards once, then answers);
// - an SSE stream resumed through B with Last-Event-ID has no gap and no duplicate (the same frames as A's);
// - an agent whose node holds no lease is answered from its record (exited) or refused with 503 naming it;
// - a running job's stream and cancel through the node that does not run it reach the runner;
// - a per-caller cap of 2 across both nodes: 3 agents spawned at once, split across A and B, exactly one
//   refused (three rounds; the places are given back at each DELETE).
// Nothing is left: containers and networks (each test Berth's stop), PostgreSQL's processes and directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { metric, startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, turnEnded, types } from '../support/agents.js';
import { ClusterCallers, clusterNodeEnv, queryDatabase, stopCluster } from '../support/cluster-nodes.js';
import { freePort, startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';

const callers = new ClusterCallers(['alice', 'bob', 'carol'] as const);
type CallerName = 'alice' | 'bob' | 'carol';
const FORWARDED_FROM = 'x-berth-forwarded-from';

describe('requests forwarded to the node that runs the agent', { timeout: 240_000 }, () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  let a: TestBerth | undefined;
  let b: TestBerth | undefined;
  let agentId: string;
  let owner: string;

  const nodeEnv = async (name: string) =>
    clusterNodeEnv(address, { name, port: await freePort() }, callers, { SERVICE_MAX_CONTAINERS_PER_CALLER: '2', SERVICE_SSE_HEARTBEAT_INTERVAL: '1s' });
  const as = (caller: CallerName) => callers.as(caller);
  const streamOf = (node: TestBerth, id: string) => `${node.url}/agents/${id}/stream`;
  const forwarded = (node: TestBerth, route: string, outcome = 'forwarded') =>
    metric(node, `berth_forwarded_requests_total{route="${route}",outcome="${outcome}"}`).catch(() => 0);

  const sql = <Row extends object>(text: string, values: unknown[] = []) => queryDatabase<Row>(address, text, values);

  async function statusThrough(node: TestBerth, id: string, status: string): Promise<any> {
    return waitFor(`agent ${id} ${status}, read through ${node.url}`, async () => {
      const read = await node.request('GET', `/agents/${id}`, undefined, as('alice'));
      assert.equal(read.status, 200, JSON.stringify(read.body));
      return read.body.status === status ? read.body : undefined;
    }, 60_000, 100);
  }

  before(async () => {
    server = await startPostgres();
    address = await server.createDatabase('forward');
    const [envA, envB] = [await nodeEnv('node-a'), await nodeEnv('node-b')];
    [a, b] = await Promise.all([startTestBerth(envA), startTestBerth(envB)]);
    await callers.signIn(a);
    const spawned = await a.request('POST', '/agents', {}, as('alice'));
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    agentId = spawned.body.id as string;
    // The spawn answers once the agent's record is in the shared store: at once, another node finds it.
    const atOnce = await b.request('GET', `/agents/${agentId}`, undefined, as('alice'));
    assert.equal(atOnce.status, 200, `read through B right after the spawn: ${JSON.stringify(atOnce.body)}`);
    owner = await waitFor('the agent\'s record in the shared store', async () => {
      const [row] = await sql<{ owner: string }>('SELECT owner FROM agents WHERE id = $1', [agentId]);
      return row?.owner;
    }, 10_000, 50);
  });

  after(() => stopCluster([a, b], server));

  test('the owner drives its agent on node A entirely through node B: read, send, SSE stream, list', async () => {
    await statusThrough(b!, agentId, 'idle');
    const stream = follow(streamOf(b!, agentId), (frames) => frames.some((f) => f.event === 'turn_end'), as('alice'));
    await stream.ready;
    const sent = await b!.request('POST', `/agents/${agentId}/send`, { prompt: 'say: through node b' }, as('alice'));
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const frames = await stream.done;
    assert.deepEqual([types(frames)[0], types(frames).at(-1)], ['turn_start', 'turn_end'], JSON.stringify(frames));
    assert.ok(frames.every((f) => f.data.turn_id === sent.body.turn_id));
    assert.ok(frames.some((f) => f.event === 'output' && f.data.content.includes('through node b')), 'the turn\'s output came through B');
    assert.equal((await statusThrough(b!, agentId, 'idle')).turns_completed, 1);

    const listed = await b!.request('GET', '/agents', undefined, as('alice'));
    assert.deepEqual(listed.body.agents.map((agent: { id: string }) => agent.id), [agentId], 'B lists the caller\'s agent on A');
    assert.equal(await forwarded(b!, 'POST /agents/:id/send'), 1);
    assert.ok((await forwarded(b!, 'GET /agents/:id/stream')) >= 1);
  });

  test('another caller gets through node B exactly what node A answers it: 404, nothing listed', async () => {
    const requests: [string, string, unknown?][] = [
      ['GET', `/agents/${agentId}`],
      ['POST', `/agents/${agentId}/send`, { prompt: 'say: hijack' }],
      ['GET', `/agents/${agentId}/stream`],
      ['DELETE', `/agents/${agentId}`],
    ];
    for (const [method, path, body] of requests) {
      const onA = await a!.request(method, path, body, as('bob'));
      const onB = await b!.request(method, path, body, as('bob'));
      assert.equal(onA.status, 404, `${method} ${path} on A: ${JSON.stringify(onA.body)}`);
      assert.deepEqual([onB.status, onB.body], [onA.status, onA.body], `${method} ${path} through B`);
    }
    assert.deepEqual((await b!.request('GET', '/agents', undefined, as('bob'))).body.agents, []);
    assert.equal((await statusThrough(b!, agentId, 'idle')).turns_completed, 1, 'the agent took no turn of bob\'s');
  });

  test('a forged X-Berth-Forwarded-From bypasses no authentication and does not make node B the owner', async () => {
    const before = await forwarded(b!, 'GET /agents/:id');
    for (const node of [a!, b!]) {
      for (const headers of [{}, { authorization: 'Bearer forged' }] as Record<string, string>[]) {
        const read = await node.request('GET', `/agents/${agentId}`, undefined, { ...headers, [FORWARDED_FROM]: 'node-b' });
        assert.equal(read.status, 401, `${node.url}: ${JSON.stringify(read.body)}`);
        const send = await node.request('POST', `/agents/${agentId}/send`, { prompt: 'say: unauthenticated' }, { ...headers, [FORWARDED_FROM]: 'node-a' });
        assert.equal(send.status, 401, `${node.url}: ${JSON.stringify(send.body)}`);
      }
    }
    // The owner node authenticates the request itself: a forwarded-looking request of another caller is that caller's.
    const asBob = await a!.request('POST', `/agents/${agentId}/send`, { prompt: 'say: as if forwarded' }, { ...as('bob'), [FORWARDED_FROM]: 'node-b' });
    assert.equal(asBob.status, 404, JSON.stringify(asBob.body));
    // With the header, B answers with what it has itself (it does not run the agent) and forwards nothing.
    const onB = await b!.request('GET', `/agents/${agentId}`, undefined, { ...as('alice'), [FORWARDED_FROM]: 'node-a' });
    assert.equal(onB.status, 404, JSON.stringify(onB.body));
    assert.equal(await forwarded(b!, 'GET /agents/:id'), before, 'B forwarded none of these');
    assert.equal((await statusThrough(b!, agentId, 'idle')).turns_completed, 1, 'no forged request reached the agent');
  });

  test('a stream resumed through node B with Last-Event-ID has no gap and no duplicate: the same frames as node A serves', async () => {
    // Every event kept so far, through B: the frames of the first turn, with their ids.
    const kept = follow(streamOf(b!, agentId), (frames) => frames.filter((f) => f.event === 'turn_end').length >= 1, { ...as('alice'), 'last-event-id': '0' });
    const keptFrames = await kept.done;
    const middle = keptFrames[Math.floor(keptFrames.length / 2)]!.id!;
    // A turn taken while nobody listens.
    const sent = await b!.request('POST', `/agents/${agentId}/send`, { prompt: 'say: while nobody listens' }, as('alice'));
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.equal((await statusThrough(b!, agentId, 'idle')).turns_completed, 2);
    const resumed = (node: TestBerth) =>
      follow(streamOf(node, agentId), turnEnded(sent.body.turn_id), { ...as('alice'), 'last-event-id': String(middle) }).done;
    const [throughB, onA] = await Promise.all([resumed(b!), resumed(a!)]);
    const ids = throughB.map((f) => f.id);
    assert.deepEqual(ids, onA.map((f) => f.id), 'the same events through B as on A');
    assert.deepEqual(types(throughB), types(onA));
    assert.ok(ids.every((id, index) => id !== undefined && id > middle && (index === 0 || id > ids[index - 1]!)), `growing ids after ${middle}: ${ids.join(',')}`);
    assert.deepEqual(ids.slice(0, keptFrames.filter((f) => f.id! > middle).length), keptFrames.filter((f) => f.id! > middle).map((f) => f.id), 'the first turn\'s rest, then the second turn');
    assert.ok(throughB.some((f) => f.event === 'turn_start' && f.data.turn_id === sent.body.turn_id));
  });

  test('a forwarding loop is impossible: a node registered with node B\'s own URL gets one forward, then B answers', async () => {
    const ghost = `agent-${randomUUID()}`;
    await sql(`INSERT INTO nodes (name, url, version, holder, data_id, started_at, heartbeat_at, expires_at)
               VALUES ('node-loop', $1, 'test', 'x', 'x', now(), now(), now() + interval '1 hour')`, [b!.url]);
    await insertAgent(ghost, 'node-loop', 'idle');
    try {
      const before = await forwarded(b!, 'GET /agents/:id');
      const response = await fetch(`${b!.url}/agents/${ghost}`, { headers: as('alice'), signal: AbortSignal.timeout(15_000) });
      assert.equal(response.status, 404, await response.text());
      assert.equal(await forwarded(b!, 'GET /agents/:id'), before + 1, 'forwarded once, to itself, and answered there');
    } finally {
      await sql('DELETE FROM agents WHERE id = $1', [ghost]);
      await sql("DELETE FROM nodes WHERE name = 'node-loop'");
    }
  });

  test('an agent whose node holds no lease is answered from its record: exited is read, refused a turn, forgotten; live is a 503 naming the node', async () => {
    await sql(`INSERT INTO nodes (name, url, version, holder, data_id, started_at, heartbeat_at, expires_at)
               VALUES ('node-gone', 'http://127.0.0.1:9', 'test', 'x', 'x', now(), now(), now() - interval '1 second')`);
    const exited = `agent-${randomUUID()}`;
    const live = `agent-${randomUUID()}`;
    await insertAgent(exited, 'node-gone', 'exited', 'agent: its node was lost (node_lost)');
    await insertAgent(live, 'node-gone', 'idle');
    try {
      const read = await b!.request('GET', `/agents/${exited}`, undefined, as('alice'));
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.deepEqual([read.body.status, read.body.exit_error], ['exited', 'agent: its node was lost (node_lost)']);
      const send = await b!.request('POST', `/agents/${exited}/send`, { prompt: 'say: too late' }, as('alice'));
      assert.equal(send.status, 410, JSON.stringify(send.body));
      const stream = await follow(streamOf(b!, exited), () => false, as('alice')).done;
      assert.deepEqual(types(stream), ['exited', 'closed']);
      assert.equal((await b!.request('GET', `/agents/${exited}`, undefined, as('bob'))).status, 404, 'another caller: 404 as ever');
      assert.equal((await b!.request('DELETE', `/agents/${exited}`, undefined, as('alice'))).status, 204);
      assert.equal((await b!.request('GET', `/agents/${exited}`, undefined, as('alice'))).status, 404);
      const unreachable = await b!.request('POST', `/agents/${live}/send`, { prompt: 'say: hello?' }, as('alice'));
      assert.equal(unreachable.status, 503, JSON.stringify(unreachable.body));
      assert.match(unreachable.body.error, /node node-gone, which holds no live lease/);
    } finally {
      await sql('DELETE FROM agents WHERE id = ANY($1)', [[exited, live]]);
      await sql("DELETE FROM nodes WHERE name = 'node-gone'");
    }
  });

  test('the caller\'s cap of 2 holds across both nodes: 3 agents spawned at once, split across A and B, exactly one refused (three rounds)', async () => {
    // Three rounds: the refusal must not depend on which node's request reaches the database first.
    for (const nodes of [[a!, b!, a!], [b!, a!, b!], [a!, b!, b!]]) {
      const spawns = await Promise.all(nodes.map((node) => node.request('POST', '/agents', {}, as('carol'))));
      assert.deepEqual(spawns.map((spawn) => spawn.status).sort(), [200, 200, 429], JSON.stringify(spawns.map((spawn) => spawn.body)));
      const refused = spawns.find((spawn) => spawn.status === 429)!;
      assert.match(refused.body.error, /too many containers: this caller already has 2 runs, streams or agents running \(SERVICE_MAX_CONTAINERS_PER_CALLER\)/);
      const spawned = spawns.filter((spawn) => spawn.status === 200).map((spawn) => spawn.body.id as string);
      const [row] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM container_slots WHERE caller = (SELECT owner FROM agents WHERE id = $1)', [spawned[0]]);
      assert.equal(row?.n, 2, 'two places recorded for carol');
      // Stopped through B, wherever they run; their places are given back.
      for (const id of spawned) {
        const deleted = await b!.request('DELETE', `/agents/${id}`, undefined, as('carol'));
        assert.equal(deleted.status, 204, JSON.stringify(deleted.body));
      }
    }
  });

  test('the owner stops its agent through node B; the exited agent is then read through B', async () => {
    const deleted = await b!.request('DELETE', `/agents/${agentId}`, undefined, as('alice'));
    assert.equal(deleted.status, 204, JSON.stringify(deleted.body));
    const exited = await statusThrough(b!, agentId, 'exited');
    assert.equal(exited.exit_error, 'agent: stopped by DELETE /agents/:id');
    assert.deepEqual(await a!.leftovers(), [], 'the agent\'s container on A is gone');
  });

  test('a running job\'s stream and cancel through the node that does not run it are forwarded to its runner', async () => {
    const submitted = await a!.request('POST', '/run/async', { prompt: 'sleep: 60000\nsay: never' }, as('alice'));
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    const jobId = submitted.body.job_id as string;
    // Whichever node claimed it runs it; the other is asked.
    const runner = await waitFor('the job to run', async () => {
      const [row] = await sql<{ status: string; node: string }>('SELECT status, node FROM jobs WHERE id = $1', [jobId]);
      return row?.status === 'running' ? row.node : undefined;
    }, 60_000, 100);
    const other = runner === 'node-a' ? b! : a!;
    const before = await forwarded(other, 'DELETE /jobs/:id');
    const stream = follow(`${other.url}/jobs/${jobId}/stream`, (frames) => frames.some((f) => f.event === 'closed'), as('alice'));
    await stream.ready;
    assert.equal((await other.request('DELETE', `/jobs/${jobId}`, undefined, as('bob'))).status, 404, 'another caller: 404, nothing forwarded');
    const cancelled = await other.request('DELETE', `/jobs/${jobId}`, undefined, as('alice'));
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.status, 'cancelled');
    const frames = await stream.done;
    assert.deepEqual(frames.filter((f) => f.event === 'status').map((f) => f.data.status).slice(-1), ['cancelled'], JSON.stringify(frames));
    assert.equal(await forwarded(other, 'DELETE /jobs/:id'), before + 1);
    assert.ok((await forwarded(other, 'GET /jobs/:id/stream')) >= 1);
    assert.deepEqual([...(await a!.leftovers()), ...(await b!.leftovers())], [], 'the job\'s container is gone once the cancel answered');
  });

  async function insertAgent(id: string, node: string, status: string, exitError?: string): Promise<void> {
    await sql(
      `INSERT INTO agents (id, node, owner, session_id, run_id, inputs_id, container, workdir, persistent, idle_timeout_seconds,
         idle_timeout_disabled, status, exit_error, created_at, last_activity_at, exited_at)
       VALUES ($1, $2, $3, $4, $5, $5, $6, '/workspace', true, 1800, false, $7, $8, now(), now(), CASE WHEN $7 = 'exited' THEN now() END)`,
      [id, node, owner, randomUUID(), `run-${randomUUID()}`, `berth-${id}`, status, exitError === undefined ? null : JSON.stringify(exitError)],
    );
  }
});
