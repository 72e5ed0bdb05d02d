// Async jobs dispatched through one PostgreSQL to two real Berths (issue 26; docs/jobs.md "Several nodes"):
// node A in this process with one slot (SERVICE_MAX_CONCURRENT_RUNS=1), node B a child process (so that it can
// be killed with SIGKILL) with a short lease. Twelve jobs submitted to A only are run partly by B, each exactly
// once, each webhook delivered once. Then B is killed while it runs two jobs and two more wait in the queue:
// A declares B lost once its lease lapses, the two running jobs crash with `node_lost` and one webhook each
// says so, and the waiting ones are run by A. B started again on its data directory finds those jobs no longer
// its own: their containers are removed, never followed again. An agent on B is exited `node_lost` likewise
// and its container removed at B's next start. A job accepted by B while its slots are busy takes B's
// pre-started engine, named after the job's run a second later, and waits; after B's death A runs it under a
// run id of its own, never into the dead node's container name (both nodes share this host's Podman). A job
// resuming a session made on A, submitted to A while A's slot is busy, is not pinned to A: B runs it with the
// earlier conversation (the offline model's recall:) and its workspace (both nodes have one SERVICE_SHARED_DIR),
// and the turn it added is what A's next resume sees. Nothing is left: containers (each node's stop, B's
// disposal), the PostgreSQL server, the shared directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { measureDispatchLatency } from '../../bench/dispatch-latency.js';
import { metric, startTestBerth, type TestBerth } from '../support/berth.js';
import { freePort, startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';

const FINISHED = new Set(['completed', 'failed', 'crashed', 'cancelled']);

interface Hook {
  readonly job_id: string;
  readonly status: string;
  readonly crash_info: { readonly reason: string } | null;
}

async function startReceiver() {
  const hooks: Hook[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      hooks.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Hook);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    hooks,
    of: (jobId: string) => hooks.filter((hook) => hook.job_id === jobId),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

interface JobRow {
  id: string;
  status: string;
  claimed_by: string | null;
  run_id: string;
  waited_ms: number | null;
}

describe('async jobs dispatched across two nodes', { timeout: 300_000 }, () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let a: TestBerth | undefined;
  let b: ServiceProcess | undefined;
  let sharedDir: string | undefined;

  const shared = () => ({
    SERVICE_DATABASE_URL: address.url,
    SERVICE_SHARED_DIR: sharedDir!,
    SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    SERVICE_POOL_SIZE: '0',
    SERVICE_AGENT_POOL_SIZE: '0',
  });

  async function agentRow(id: string): Promise<{ status: string; exit_error: string | null; node: string } | undefined> {
    const client = new pg.Client(address.config);
    await client.connect();
    try {
      return (await client.query('SELECT status, exit_error::text AS exit_error, node FROM agents WHERE id = $1', [id])).rows[0];
    } finally {
      await client.end();
    }
  }

  async function rows(ids: readonly string[]): Promise<Map<string, JobRow>> {
    const client = new pg.Client(address.config);
    await client.connect();
    try {
      const result = await client.query<JobRow>(
        `SELECT id, status, claimed_by, run_id, (extract(epoch FROM claimed_at - queued_at) * 1000)::float8 AS waited_ms FROM jobs WHERE id = ANY($1::text[])`,
        [ids],
      );
      return new Map(result.rows.map((row) => [row.id, row]));
    } finally {
      await client.end();
    }
  }

  const submit = async (prompt: string) => {
    const response = await a!.request('POST', '/run/async', { prompt, webhook_url: receiver.url });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body.job_id as string;
  };
  const finished = (id: string, withinMs = 120_000) =>
    waitFor(`job ${id} to finish`, async () => {
      const job = await a!.request('GET', `/jobs/${id}`);
      return FINISHED.has(job.body.status) ? job.body : undefined;
    }, withinMs, 200);
  const claimedBy = async (id: string, node: string) =>
    waitFor(`job ${id} claimed by ${node}`, async () => ((await rows([id])).get(id)?.claimed_by === node ? true : undefined), 60_000, 100);

  before(async () => {
    server = await startPostgres();
    address = await server.createDatabase('cluster_jobs');
    receiver = await startReceiver();
    sharedDir = await mkdtemp(join(tmpdir(), 'berth-shared-'));
    a = await startTestBerth({
      ...shared(),
      SERVICE_ADDRESS: `127.0.0.1:${await freePort()}`,
      SERVICE_NODE_NAME: 'node-a',
      SERVICE_MAX_CONCURRENT_RUNS: '1',
    });
    // B's lease is short: its loss is seen within seconds of its death (A checks every third of A's lease).
    // B keeps one pre-started engine: a job accepted by B while its slots are busy takes it at once (a
    // container named after the job's run a second later) and waits in the queue.
    b = await serviceProcess({ ...shared(), SERVICE_NODE_NAME: 'node-b', SERVICE_NODE_LEASE: '5s', SERVICE_MAX_CONCURRENT_RUNS: '2', SERVICE_POOL_SIZE: '1' });
    await b.start();
  });

  after(async () => {
    try {
      await a?.stop();
    } finally {
      try {
        await b?.dispose();
      } finally {
        await receiver?.close();
        await server?.stop();
        if (sharedDir) await rm(sharedDir, { recursive: true, force: true });
      }
    }
    assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
  });

  test('twelve jobs submitted to node A (one slot) are run partly by node B, each once, each webhook once', async () => {
    const ids: string[] = [];
    for (let n = 1; n <= 12; n += 1) ids.push(await submit(`say: job ${n}`));
    for (const id of ids) {
      const job = await finished(id);
      assert.equal(job.status, 'completed', JSON.stringify({ job, row: (await rows([id])).get(id) }));
    }
    const recorded = await rows(ids);
    const byNode = (node: string) => ids.filter((id) => recorded.get(id)?.claimed_by === node);
    assert.ok(byNode('node-b').length > 0, `node B ran none: ${JSON.stringify([...recorded.values()])}`);
    assert.ok(byNode('node-a').length > 0, 'node A ran some');
    assert.equal(byNode('node-a').length + byNode('node-b').length, 12);
    await waitFor('every webhook', async () => ids.every((id) => receiver.of(id).length >= 1) || undefined, 30_000, 100);
    // Late duplicates would come within a retry's delay.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const id of ids) assert.deepEqual(receiver.of(id).map((hook) => hook.status), ['completed'], `${id}: one webhook`);
    const queued = ids.map((id) => recorded.get(id)!).filter((row) => row.claimed_by === 'node-b').map((row) => row.waited_ms!).sort((x, y) => x - y);
    // Time in the queue here includes waiting for a free slot (every slot is busy most of the time).
    console.log(`time in the queue of the jobs B ran, ms: ${queued.map((ms) => ms.toFixed(1)).join(' ')}`);
    assert.ok((await metric(a!, 'berth_job_dispatch_seconds_count{path="local"}')) >= 1, 'node A claimed some at submission');
  });

  test('a job resuming a session, accepted by A with its slot busy, runs on B with the earlier conversation and workspace', async () => {
    const first = await a!.request('POST', '/run', { prompt: 'say: remember the tide\nrun: echo tide-mark > notes.txt' });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const sessionId = first.body.session_id as string;
    const blocker = await submit('run: /bin/sleep 600');
    await claimedBy(blocker, 'node-a');
    const response = await a!.request('POST', '/run/async', { prompt: 'recall:', engine: { session_id: sessionId, resume: true }, webhook_url: receiver.url });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const resumed = response.body.job_id as string;
    assert.equal(response.body.session_id, sessionId);
    const job = await finished(resumed, 60_000).catch(async (error: unknown) => {
      const onB = b!.output().split('\n').filter((line) => line.includes(resumed)).slice(-5).join('\n');
      throw new Error(`${(error as Error).message}: ${JSON.stringify((await rows([resumed])).get(resumed))}\nB: ${onB}`);
    });
    assert.equal(job.status, 'completed', JSON.stringify(job));
    assert.equal((await rows([resumed])).get(resumed)?.claimed_by, 'node-b', 'not pinned to A: B ran it');
    assert.match(job.output, /remember the tide/, 'the resumed engine on B had the conversation made on A');
    const read = await a!.request('POST', '/run/async', { prompt: 'run: cat notes.txt', engine: { session_id: sessionId, resume: true } });
    assert.equal(read.status, 200, JSON.stringify(read.body));
    const readJob = await finished(read.body.job_id as string, 60_000);
    assert.equal((await rows([read.body.job_id as string])).get(read.body.job_id as string)?.claimed_by, 'node-b');
    assert.match(readJob.output, /tide-mark/, 'and the workspace made on A');
    assert.equal((await a!.request('DELETE', `/jobs/${blocker}`)).status, 200);
    // The turn B added is the session's next version: A's next resume sees both prompts.
    const again = await a!.request('POST', '/run', { prompt: 'recall:', engine: { session_id: sessionId, resume: true } });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.match(again.body.output, /remember the tide[\s\S]*recall:/, 'the turn run on B was saved, not lost to a stale save of A');
    await waitFor('the webhooks', async () => [resumed, blocker].every((id) => receiver.of(id).length >= 1) || undefined, 30_000, 100);
  });

  test('node B killed with two running jobs: they crash node_lost with one webhook each, the queued ones run on A, and B started again removes their containers', async () => {
    // A's one slot is taken by a job that waits; B's two by jobs that sleep.
    const blocker = await submit('run: /bin/sleep 600');
    await claimedBy(blocker, 'node-a');
    // Dispatch latency (bench/dispatch-latency.ts) while A is busy and B has free slots: jobs submitted to A one
    // at a time go through the queue and B claims each, woken by NOTIFY.
    const measured = await measureDispatchLatency({ baseUrl: a!.url, databaseUrl: address.url, jobs: 5, intervalMs: 0, oneAtATime: true });
    const { samples, ...summary } = measured;
    console.log(`dispatch latency: ${JSON.stringify(summary)}; queued ms: ${samples.map((x) => x.ms.toFixed(1)).join(' ')}`);
    assert.deepEqual(samples.map((x) => [x.path, x.claimedBy]), samples.map(() => ['queued', 'node-b']));
    // The target is 50 ms at the median (docs/jobs.md); this machine is shared with other test runs, so the
    // test checks the order of magnitude (a lost NOTIFY would show the 2 s poll) and the bench row the figure.
    assert.ok(measured.queued_p50_ms! < 500, `queued p50 ${measured.queued_p50_ms} ms`);
    const onB = [await submit('say: on b\nrun: /bin/sleep 600'), await submit('say: on b too\nrun: /bin/sleep 600')];
    for (const id of onB) await claimedBy(id, 'node-b');
    await waitFor('both jobs running on B', async () => {
      const recorded = await rows(onB);
      return onB.every((id) => recorded.get(id)?.status === 'running') || undefined;
    }, 60_000, 200);
    const runIds = [...(await rows(onB)).values()].map((row) => row.run_id);
    await waitFor('their containers on B', async () => runIds.every((run) => b!.containers().includes(`berth-${run}`)) || undefined, 60_000, 200);
    // And an agent lives on B.
    const spawned = await b!.api('POST', '/agents', {});
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const agentId = spawned.body.id as string;
    const agent = await waitFor('the agent on B', async () => {
      const row = await agentRow(agentId);
      return row && b!.containers().includes(`berth-${agentId}`) ? row : undefined;
    }, 60_000, 200).catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message}: ${JSON.stringify({ row: await agentRow(agentId), containers: b!.containers(), api: (await b!.api('GET', `/agents/${agentId}`)).body })}\n${b!.output().slice(-3000)}`);
    });
    assert.equal(agent.node, 'node-b');
    // Every slot is busy: these wait in the queue.
    const queued = [await submit('say: queued 1'), await submit('say: queued 2')];
    // One accepted by B: it takes B's pre-started engine, renamed after the job's run while the job waits.
    const acceptedByB = await b!.api('POST', '/run/async', { prompt: 'say: accepted by b', webhook_url: receiver.url });
    assert.equal(acceptedByB.status, 200, JSON.stringify(acceptedByB.body));
    const viaB = acceptedByB.body.job_id as string;
    queued.push(viaB);
    const acceptedRun = (await rows([viaB])).get(viaB)!.run_id;
    await waitFor('B\'s pooled engine named after the waiting job\'s run', async () => b!.containers().includes(`berth-${acceptedRun}`) || undefined, 30_000, 100)
      .catch((error: unknown) => {
        throw new Error(`${(error as Error).message}: ${JSON.stringify(b!.containers())}`);
      });
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const row of (await rows(queued)).values()) assert.deepEqual([row.status, row.claimed_by], ['pending', null]);

    await b!.signal('SIGKILL');
    for (const id of onB) {
      const job = await finished(id, 60_000);
      assert.equal(job.status, 'crashed', JSON.stringify(job));
      assert.equal(job.crash_info.reason, 'node_lost');
      assert.match(job.error, /node-b/);
    }
    const lostAgent = await agentRow(agentId);
    assert.equal(lostAgent?.status, 'exited', 'the lost node\'s agent is exited');
    assert.match(lostAgent?.exit_error ?? '', /^"node_lost: .*node-b/);
    // A's slot frees: A runs the queued jobs.
    assert.equal((await a!.request('DELETE', `/jobs/${blocker}`)).status, 200);
    for (const id of queued) assert.equal((await finished(id)).status, 'completed', id);
    const recorded = await rows(queued);
    for (const id of queued) assert.equal(recorded.get(id)?.claimed_by, 'node-a');
    // The dead node's engine is still there under the accepted run's name (one host's Podman): A ran the job
    // under a run id of its own, not into 'the container name is already in use'.
    assert.notEqual(recorded.get(viaB)?.run_id, acceptedRun, 'a run id of A\'s own');
    assert.ok(b!.containers().includes(`berth-${acceptedRun}`), 'the dead node\'s engine is left for its next start');

    await waitFor('the webhooks', async () => [...onB, ...queued, blocker].every((id) => receiver.of(id).length >= 1) || undefined, 30_000, 100);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    for (const id of onB) assert.deepEqual(receiver.of(id).map((hook) => [hook.status, hook.crash_info?.reason]), [['crashed', 'node_lost']], `${id}: one webhook, node_lost`);
    for (const id of queued) assert.deepEqual(receiver.of(id).map((hook) => hook.status), ['completed']);
    assert.deepEqual(receiver.of(blocker).map((hook) => hook.status), ['cancelled']);

    // B's containers outlived its process; its next start removes them instead of following the jobs again.
    assert.ok(runIds.some((run) => b!.containers().includes(`berth-${run}`)), 'the killed node\'s containers are still there');
    await b!.start();
    assert.deepEqual(runIds.filter((run) => b!.containers().includes(`berth-${run}`)), [], 'removed at B\'s start');
    assert.equal(b!.containers().includes(`berth-${agentId}`), false, 'the lost agent\'s container too');
    assert.equal(b!.containers().includes(`berth-${acceptedRun}`), false, 'and its engine taken for the job it accepted');
    assert.equal((await agentRow(agentId))?.status, 'exited', 'the agent is not brought back');
    for (const id of onB) assert.equal((await b!.api('GET', `/jobs/${id}`)).body.status, 'crashed', 'and still crashed');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const id of onB) assert.equal(receiver.of(id).length, 1, 'no second webhook from B');
  });
});
