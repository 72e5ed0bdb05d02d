// Live job events across nodes (issue 26; docs/jobs.md "Several nodes"): two real Berths (own instances and
// node names, one JWT secret) on one throw-away PostgreSQL 15, node A with one slot, node B with one. A job
// accepted by A while both are busy waits unclaimed, so its stream on A is served by A (forward.ts forwards only
// a claimed job's); B then claims and runs it, and every status B records reaches A's follower through the event
// log's NOTIFY (core/events/log-feeds.ts): the stream on A ends with the final status and `closed`, ids strictly
// increasing, soon after the job ended (well within the 10 s safety-net poll). A client that reconnects through
// B with Last-Event-ID gets the rest without gap or duplicate; another caller's stream is a 404 on both nodes.
// Nothing is left: containers (each Berth's stop), PostgreSQL's processes and directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, type Frame } from '../support/agents.js';
import { ClusterCallers, clusterNodeEnv, queryDatabase, stopCluster } from '../support/cluster-nodes.js';
import { freePort, startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';

const callers = new ClusterCallers(['alice', 'bob'] as const);
/**
 * How late a status may reach A's stream after B recorded it: well below the feeds' safety-net poll
 * (composition/event-feeds.ts, 10 s). The job runs longer than this, so the poll alone cannot bring both its
 * running and its final status this soon: they came by NOTIFY.
 */
const NOTIFIED_WITHIN_MS = 3_000;
const JOB_SLEEP_MS = 4_000;

describe('a job\'s live events reach its stream on a node that does not run it', { timeout: 240_000 }, () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  let a: TestBerth | undefined;
  let b: TestBerth | undefined;
  const nodeEnv = async (name: string) =>
    clusterNodeEnv(address, { name, port: await freePort() }, callers, { SERVICE_MAX_CONCURRENT_RUNS: '1', SERVICE_SSE_HEARTBEAT_INTERVAL: '1s' });
  const as = (caller: 'alice' | 'bob') => callers.as(caller);

  async function jobRow(id: string): Promise<{ status: string; claimed_by: string | null } | undefined> {
    return (await queryDatabase<{ status: string; claimed_by: string | null }>(address, 'SELECT status, claimed_by FROM jobs WHERE id = $1', [id]))[0];
  }
  const submit = async (node: TestBerth, prompt: string) => {
    const submitted = await node.request('POST', '/run/async', { prompt }, as('alice'));
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    return submitted.body.job_id as string;
  };
  const runningOn = (id: string, node: string) =>
    waitFor(`job ${id} running on ${node}`, async () => {
      const row = await jobRow(id);
      return row?.status === 'running' && row.claimed_by === node ? true : undefined;
    }, 60_000, 100);
  const statuses = (frames: Frame[]) => frames.filter((f) => f.event === 'status');

  before(async () => {
    server = await startPostgres();
    address = await server.createDatabase('cluster_events');
    const [envA, envB] = [await nodeEnv('node-a'), await nodeEnv('node-b')];
    [a, b] = await Promise.all([startTestBerth(envA), startTestBerth(envB)]);
    await callers.signIn(a);
  });

  after(() => stopCluster([a, b], server));

  test('a stream on A opened while the job waits ends with the status B records and closed; a reconnect through B resumes; bob gets 404', async () => {
    // Each node's one slot is taken by a job it claimed at submission.
    const blockerA = await submit(a!, 'sleep: 120000\nsay: never');
    const blockerB = await submit(b!, 'sleep: 120000\nsay: never');
    await Promise.all([runningOn(blockerA, 'node-a'), runningOn(blockerB, 'node-b')]);

    const jobId = await submit(a!, `sleep: ${JOB_SLEEP_MS}\nsay: done across nodes`);
    assert.deepEqual(await jobRow(jobId), { status: 'pending', claimed_by: null }, 'waits unclaimed');
    const onA = follow(`${a!.url}/jobs/${jobId}/stream`, (frames) => frames.some((f) => f.event === 'closed'), as('alice'));
    assert.equal((await onA.ready).status, 200);
    // When each frame reached the test.
    const arrivals: number[] = [];
    const clock = setInterval(() => {
      while (arrivals.length < onA.frames.length) arrivals.push(Date.now());
    }, 10);
    await waitFor('the pending status on A\'s stream', async () => statuses(onA.frames).length >= 1 || undefined, 10_000, 50);

    // Another caller: 404 on both nodes, the accepting one and the one about to run it.
    for (const node of [a!, b!]) {
      const response = await fetch(`${node.url}/jobs/${jobId}/stream`, { headers: as('bob') });
      assert.equal(response.status, 404, `bob's stream through ${node.url}`);
      await response.body?.cancel();
    }

    // B's slot frees: B claims the job (A's is still busy) and runs it.
    assert.equal((await b!.request('DELETE', `/jobs/${blockerB}`, undefined, as('alice'))).status, 200);
    await runningOn(jobId, 'node-b');
    const finished = await waitFor(`job ${jobId} to finish`, async () => {
      const job = await b!.request('GET', `/jobs/${jobId}`, undefined, as('alice'));
      return ['completed', 'failed', 'crashed', 'cancelled'].includes(job.body.status) ? job.body : undefined;
    }, 60_000, 50);
    const endedAt = Date.now();
    assert.equal(finished.status, 'completed', JSON.stringify(finished));

    // A's stream ends by itself (a bounded wait: without the feeds it never would).
    let timer: NodeJS.Timeout | undefined;
    const frames = await Promise.race([
      onA.done,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`A's stream did not end within 20 s of the job's end: ${JSON.stringify(onA.frames)}`)), 20_000))),
    ]).finally(() => {
      clearTimeout(timer);
      clearInterval(clock);
      onA.stop();
    });
    while (arrivals.length < frames.length) arrivals.push(Date.now());
    console.log(`A's stream closed ${arrivals.at(-1)! - endedAt} ms after the job was read finished on B`);
    assert.deepEqual(statuses(frames).map((f) => f.data.status), ['pending', 'running', 'completed'], JSON.stringify(frames));
    // B's statuses reached A soon after B recorded them: by NOTIFY, not by the poll.
    const late = frames
      .map((frame, n) => ({ status: frame.data.status as string, lateMs: arrivals[n]! - Date.parse(frame.data.at as string) }))
      .filter((frame) => frame.status === 'running' || frame.status === 'completed');
    console.log(`B's statuses on A's stream, ms after B recorded them: ${JSON.stringify(late)}`);
    for (const { status, lateMs } of late) assert.ok(lateMs < NOTIFIED_WITHIN_MS, `${status} reached A's stream ${lateMs} ms after B recorded it`);
    assert.equal(frames.at(-1)?.event, 'closed');
    const ids = statuses(frames).map((f) => f.id!);
    assert.ok(ids.every((id, n) => Number.isSafeInteger(id) && (n === 0 || id > ids[n - 1]!)), `ids strictly increasing: ${ids.join(' ')}`);

    // A client that had only the first event reconnects through B: the rest, the same frames, nothing twice.
    const resumed = follow(`${b!.url}/jobs/${jobId}/stream`, (got) => got.some((f) => f.event === 'closed'), { ...as('alice'), 'last-event-id': String(ids[0]) });
    assert.equal((await resumed.ready).status, 200);
    const rest = await resumed.done;
    assert.deepEqual(statuses(rest), statuses(frames).slice(1), 'no gap, no duplicate');
    assert.equal(rest.at(-1)?.event, 'closed');

    assert.equal((await a!.request('DELETE', `/jobs/${blockerA}`, undefined, as('alice'))).status, 200);
    assert.deepEqual([...(await a!.leftovers()), ...(await b!.leftovers())], [], 'every job container is gone');
  });
});
