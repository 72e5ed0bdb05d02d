// The cluster of issue 26 as `make cluster` starts it (scripts/cluster.sh as a child process: a throw-away
// PostgreSQL 15, three nodes on real Podman, HAProxy with deploy/haproxy.cfg), under 60 mixed requests through
// HAProxy — sync runs, async jobs with webhooks to a local receiver, streams, agent turns — while node-3 and its
// containers are killed -9 mid-load, as a host is lost. First, the attack on the throw-away database: no
// connection without its password over TCP, none on another address, its trusted socket out of other users'
// reach, its URL root's only. Then:
// - every accepted job reaches a final state exactly once (one final status event in its stream, the same as
//   its record, which does not change afterwards), and its webhook is delivered exactly once;
// - sync runs and streams sent once HAProxy has seen the loss all succeed;
// - agents on the other nodes are unaffected (every turn completes, same containers, still idle); the lost
//   node's agent is `exited` with node_lost;
// - a session last run on the lost node resumes on another node with its workspace (a file it wrote) and its
//   transcript (recall);
// - an agent stream followed through the lost node (which forwarded it to the agent's owner) and reconnected
//   through HAProxy with Last-Event-ID has, with what the first connection got, no gap and no duplicate;
// - SIGINT to the script (Ctrl-C) leaves nothing: processes (nodes, their Podman services, HAProxy,
//   PostgreSQL), containers, networks, nftables tables, mounts, loop devices, the directory but its logs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { follow, type Frame } from '../support/agents.js';
import { FINAL_STATUSES, jobLedgerProblems, streamProblems, type JobOutcome, type WebhookDelivery } from '../support/cluster-ledger.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { sseData } from '../support/sse.js';
import { waitFor } from '../support/wait.js';

const exec = promisify(execFile);
const TOTAL = 60;
const CONCURRENCY = 4;
/** The node lost mid-load (index): node-3. */
const LOST = 2;
/** Requests sent this long after the kill must not fail: HAProxy has taken the node out by then. */
const LOSS_SEEN_MS = 5_000;

type Kind = 'sync' | 'async' | 'stream' | 'agent';
interface Sent {
  readonly index: number;
  readonly kind: Kind;
  readonly startedAt: number;
  readonly ok: boolean;
  readonly detail: string;
  readonly jobId?: string;
  readonly ms: number;
}

async function api(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) };
  } catch {
    return { status: response.status, body: text };
  }
}

describe('a three-node cluster behind HAProxy loses a node mid-load', { timeout: 600_000 }, () => {
  let cluster: TestCluster;
  let receiver: Server;
  let hookBase = '';
  const deliveries: (WebhookDelivery & { path: string })[] = [];
  /** Agents by where they live: one per surviving node for the load, one for the stream test, one on the lost node. */
  const agents = { one: '', two: '', streamed: '', lost: '' };
  const containersBefore = new Map<string, string>();
  let sessionId = '';
  const marker = `cluster-marker-${randomBytes(4).toString('hex')}`;
  let killedAt = 0;
  const sent: Sent[] = [];
  const agentTurns = new Map<string, { sent: number; unknown: number; status: number[] }>();
  /** The stream test: frames the first connection (through the lost node) got, and the turn it followed. */
  let firstConnection: ReturnType<typeof follow> | undefined;
  let streamedTurn = '';

  const node = (i: number) => cluster.nodes[i]!.url;
  const lb = () => cluster.url;

  async function waitIdle(base: string, id: string, withinMs = 90_000) {
    return waitFor(`agent ${id} idle`, async () => {
      const { body } = await api(base, 'GET', `/agents/${id}`);
      if (body.status === 'exited') throw new Error(`agent ${id} exited: ${body.exit_error}`);
      return body.status === 'idle' ? body : undefined;
    }, withinMs, 200);
  }

  /** The container Podman runs for an agent on node `i` (its name ends with the agent's id). */
  async function agentContainer(i: number, agentId: string): Promise<string | undefined> {
    const { stdout } = await exec('podman', ['ps', '--filter', `label=berth.instance=${cluster.nodes[i]!.instance}`, '--format', '{{.ID}} {{.Names}}']);
    const suffix = agentId.replace(/^agent-/, '');
    return stdout.split('\n').find((line) => line.trim().endsWith(suffix))?.split(' ')[0];
  }

  before(async () => {
    receiver = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString()));
      req.on('end', () => {
        try {
          const payload = JSON.parse(text) as { job_id: string; status: string };
          deliveries.push({ job_id: payload.job_id, status: payload.status, path: req.url ?? '' });
        } catch {
          deliveries.push({ job_id: `(unreadable: ${text.slice(0, 80)})`, status: '', path: req.url ?? '' });
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    cluster = await startCluster({
      env: {
        SERVICE_AUTH_ENABLED: 'false',
        SERVICE_RATE_LIMIT_ENABLED: 'false',
        SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
        // The shortest lease: the loss is noticed within seconds.
        SERVICE_NODE_LEASE: '3s',
        SERVICE_POOL_SIZE: '1',
        SERVICE_AGENT_POOL_SIZE: '0',
      },
    });
  });

  after(async () => {
    firstConnection?.stop();
    await cluster?.dispose();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  test('make cluster: three nodes answer, each on its own, and HAProxy answers for them', async () => {
    for (const [i, n] of cluster.nodes.entries()) {
      const health = await api(n.url, 'GET', '/health');
      assert.equal(health.status, 200);
      assert.equal(health.body.status, 'ok', JSON.stringify(health.body));
      assert.equal(health.body.node, `node-${i + 1}`);
    }
    const seen = new Set<string>();
    for (let i = 0; i < 12 && seen.size < 3; i += 1) seen.add((await api(lb(), 'GET', '/health')).body.node);
    assert.deepEqual([...seen].sort(), ['node-1', 'node-2', 'node-3'], 'HAProxy balances over the three nodes');
    assert.match(cluster.output(), new RegExp(`curl -s -X POST ${lb()}/run`), 'it prints the curl, as make up does');
  });

  test('the throw-away PostgreSQL admits no one without its password: not over TCP, not through its socket; its URL is root\'s only', async () => {
    const url = new URL(cluster.databaseUrl());
    assert.equal(url.hostname, '127.0.0.1');
    // Over TCP with the right user and no password, or a wrong one: refused (scram-sha-256 on host lines).
    for (const password of [undefined, 'guess']) {
      const client = new pg.Client({ host: '127.0.0.1', port: Number(url.port), user: 'berth', database: 'berth', ...(password ? { password } : {}), connectionTimeoutMillis: 5_000 });
      await assert.rejects(client.connect(), /password/, `password ${password ?? '(none)'} is refused`);
      await client.end().catch(() => undefined);
    }
    // Only on 127.0.0.1: not on the host's other addresses.
    const others = (await exec('hostname', ['-I'])).stdout.trim().split(/\s+/).filter((a) => a && !a.startsWith('127.') && !a.includes(':'));
    for (const address of others) {
      const client = new pg.Client({ host: address, port: Number(url.port), user: 'berth', database: 'berth', password: url.password, connectionTimeoutMillis: 3_000 });
      await assert.rejects(client.connect(), /ECONNREFUSED|timeout/i, `not listening on ${address}`);
      await client.end().catch(() => undefined);
    }
    // Trust is for the socket, in a directory only the postgres user can enter: another user cannot reach it.
    const socketDir = join(cluster.dir, 'pg', 'socket');
    const asNobody = await exec('runuser', ['-u', 'nobody', '--', 'ls', socketDir]).then(() => 'listed', (error: { stderr?: string }) => String(error.stderr));
    assert.match(asNobody, /Permission denied/, 'nobody cannot enter the socket directory');
    // The URL with its password: root's only (run/ 0700, database.env 0600).
    assert.equal((await stat(join(cluster.dir, 'run'))).mode & 0o777, 0o700);
    assert.equal((await stat(join(cluster.dir, 'run', 'database.env'))).mode & 0o777, 0o600);
  });

  test('before the loss: agents on each node, a session run on node-3, a stream of node-2\'s agent followed through node-3', async () => {
    const spawn = async (i: number) => {
      const { status, body } = await api(node(i), 'POST', '/agents', { disable_idle_timeout: true });
      assert.equal(status, 200, JSON.stringify(body));
      return body.id as string;
    };
    agents.one = await spawn(0);
    agents.two = await spawn(1);
    agents.streamed = await spawn(1);
    agents.lost = await spawn(LOST);
    for (const [i, id] of [[0, agents.one], [1, agents.two], [1, agents.streamed], [LOST, agents.lost]] as const) {
      await waitIdle(node(i), id);
      const container = await agentContainer(i, id);
      assert.ok(container, `agent ${id}'s container runs on node-${i + 1}`);
      containersBefore.set(id, container);
    }

    const run = await api(node(LOST), 'POST', '/run', { prompt: `run: echo ${marker} > /workspace/marker.txt\nsay: noted ${marker}` });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    sessionId = run.body.session_id;
    assert.ok(sessionId, JSON.stringify(run.body));

    // Followed through node-3, which does not own the agent: node-3 forwards the stream to node-2.
    firstConnection = follow(`${node(LOST)}/agents/${agents.streamed}/stream`);
    // It breaks when node-3 is killed: what it received is read later, its failure is expected.
    firstConnection.done.catch(() => undefined);
    await firstConnection.ready;
  });

  test('60 mixed requests through HAProxy, node-3 killed -9 with its containers mid-load: every request sent once the loss is seen succeeds', async () => {
    const kinds: readonly Kind[] = ['sync', 'async', 'stream', 'agent', 'async'];
    let next = 0;
    let done = 0;
    const oneRequest = async (index: number, kind: Kind): Promise<Omit<Sent, 'ms'>> => {
      const startedAt = Date.now();
      // Some jobs last a while, so that the loss finds some running on node-3 (crashed, node_lost) and some
      // pending in the queue (claimed by the others).
      const prompt = kind === 'async' && index % 3 === 0 ? `run: /bin/sleep 2\nsay: load ${index}` : `say: load ${index}`;
      try {
        switch (kind) {
          case 'sync': {
            const { status, body } = await api(lb(), 'POST', '/run', { prompt });
            return { index, kind, startedAt, ok: status === 200 && String(body.output).includes(`load ${index}`), detail: `${status} ${JSON.stringify(body).slice(0, 200)}` };
          }
          case 'async': {
            const { status, body } = await api(lb(), 'POST', '/run/async', { prompt, webhook_url: `${hookBase}/${index}` });
            return { index, kind, startedAt, ok: status === 200, detail: `${status} ${JSON.stringify(body).slice(0, 200)}`, ...(status === 200 ? { jobId: body.job_id } : {}) };
          }
          case 'stream': {
            const response = await fetch(`${lb()}/run/stream?${new URLSearchParams({ prompt })}`);
            const text = await response.text();
            const frames = sseData<{ type: string; content?: string }>(text);
            const ok = response.status === 200 && frames.at(-1)?.type === 'done' && frames.some((f) => f.type === 'output' && String(f.content).includes(`load ${index}`));
            return { index, kind, startedAt, ok, detail: `${response.status} ${text.slice(-200)}` };
          }
          case 'agent': {
            // Turns alternate between the agents of node-1 and node-2; the request reaches any node.
            const id = index % 2 === 0 ? agents.one : agents.two;
            const record = agentTurns.get(id) ?? { sent: 0, unknown: 0, status: [] };
            agentTurns.set(id, record);
            // One turn at a time per agent: wait for the previous one (sent by another worker) to end.
            await waitIdle(lb(), id, 60_000);
            // A send whose answer is lost (node-3 forwarding it dies) may or may not have been taken.
            const answer = await api(lb(), 'POST', `/agents/${id}/send`, { prompt: `say: turn ${index}` }).catch((error: Error) => {
              record.unknown += 1;
              throw error;
            });
            const { status, body } = answer;
            record.status.push(status);
            if (status !== 200) return { index, kind, startedAt, ok: false, detail: `${status} ${JSON.stringify(body)}` };
            record.sent += 1;
            await waitIdle(lb(), id, 60_000);
            return { index, kind, startedAt, ok: true, detail: '200' };
          }
        }
      } catch (error) {
        return { index, kind, startedAt, ok: false, detail: (error as Error).message };
      }
    };
    const worker = async () => {
      for (let index = next++; index < TOTAL; index = next++) {
        const startedAt = Date.now();
        const result = await oneRequest(index, kinds[index % kinds.length]!);
        sent.push({ ...result, ms: Date.now() - startedAt });
        done += 1;
      }
    };
    const started = Date.now();
    const load = Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await waitFor('a third of the load', async () => done >= TOTAL / 3 || undefined, 120_000, 50);
    // A turn of node-2's agent under way on the stream node-3 forwards: node-3 dies in the middle of it.
    const sentTurn = await api(lb(), 'POST', `/agents/${agents.streamed}/send`, { prompt: 'say: before the loss\nrun: /bin/sleep 4\nsay: after the loss' });
    assert.equal(sentTurn.status, 200, JSON.stringify(sentTurn.body));
    streamedTurn = sentTurn.body.turn_id;
    await waitFor('the turn\'s first output through node-3', async () => firstConnection!.frames.some((f) => f.event === 'output' && f.data.turn_id === streamedTurn) || undefined, 30_000, 20);
    killedAt = Date.now();
    await cluster.killNode(LOST);
    await load;
    const took = (kind: Kind) => sent.filter((s) => s.kind === kind).map((s) => s.ms).sort((a, b) => a - b);
    console.log(`load: ${TOTAL} requests in ${Date.now() - started} ms, killed at +${killedAt - started} ms; median ms: ${(['sync', 'async', 'stream', 'agent'] as const).map((k) => `${k} ${Math.round(took(k)[Math.floor(took(k).length / 2)] ?? NaN)}`).join(', ')}`);

    const failedLate = sent.filter((s) => !s.ok && s.startedAt > killedAt + LOSS_SEEN_MS && s.kind !== 'agent');
    assert.deepEqual(failedLate.map((s) => `${s.index} ${s.kind}: ${s.detail}`), [], 'every sync run and stream sent once HAProxy saw the loss succeeded');
    const failedBefore = sent.filter((s) => !s.ok && s.startedAt < killedAt);
    assert.ok(failedBefore.length <= CONCURRENCY, `at most the requests in flight at the kill failed: ${failedBefore.map((s) => `${s.index} ${s.kind}: ${s.detail}`).join('; ')}`);
    assert.ok(sent.filter((s) => s.kind === 'async' && s.jobId).length >= 20, 'jobs were accepted');
  });

  test('every accepted job reaches a final state exactly once, and its webhook is delivered exactly once', async () => {
    const accepted = sent.filter((s) => s.jobId).map((s) => s.jobId!);
    assert.ok(accepted.length > 0);
    const finals = await waitFor('every accepted job to be final', async () => {
      const jobs = await Promise.all(accepted.map(async (id) => (await api(lb(), 'GET', `/jobs/${id}`)).body));
      return jobs.every((job) => FINAL_STATUSES.has(job.status)) ? jobs : undefined;
    }, 60_000, 500).catch(async (error: Error) => {
      const jobs = await Promise.all(accepted.map(async (id) => (await api(lb(), 'GET', `/jobs/${id}`)).body));
      throw new Error(`${error.message}: ${jobs.filter((job) => !FINAL_STATUSES.has(job.status)).map((job) => `${job.id ?? job.job_id} ${job.status}`).join(', ')}`);
    });
    // Webhooks are sent after the record: give the last ones a moment, and a redelivery the time to show.
    await waitFor('a webhook per job', async () => accepted.every((id) => deliveries.some((d) => d.job_id === id)) || undefined, 30_000, 200).catch(() => undefined);
    await delay(3_000);
    const outcomes: JobOutcome[] = [];
    for (const id of accepted) {
      const log: Frame[] = await follow(`${lb()}/jobs/${id}/stream`, () => false, { 'last-event-id': '0' }).done;
      const now = (await api(lb(), 'GET', `/jobs/${id}`)).body;
      outcomes.push({ id, status: now.status, statusEvents: log.filter((f) => f.event === 'status').map((f) => f.data.status) });
    }
    // A submission whose answer was lost with node-3 may still have been accepted: its webhook is not counted
    // against a job nobody knows of, but any job the test was told of must be announced once.
    const lostAnswers = new Set(sent.filter((s) => s.kind === 'async' && !s.jobId).map((s) => `/hook/${s.index}`));
    const counted = deliveries.filter((d) => !lostAnswers.has(d.path));
    assert.deepEqual(jobLedgerProblems(accepted, outcomes, counted), []);
    const byStatus = new Map<string, number>();
    for (const job of finals) byStatus.set(job.status, (byStatus.get(job.status) ?? 0) + 1);
    for (const job of finals.filter((j) => j.status === 'crashed')) assert.match(JSON.stringify(job), /node_lost/, 'a job crashed by the loss says node_lost');
    for (const job of finals.filter((j) => j.status !== 'crashed')) assert.equal(job.status, 'completed', JSON.stringify(job));
    console.log(`jobs: ${[...byStatus].map(([s, n]) => `${n} ${s}`).join(', ')}`);
  });

  test('agents on the other nodes are unaffected; the lost node\'s agent is exited with node_lost', async () => {
    for (const id of [agents.one, agents.two]) {
      const record = agentTurns.get(id);
      assert.ok(record && record.sent > 0, `agent ${id} took turns during the load`);
      assert.deepEqual(record.status.filter((s) => s !== 200), [], `every turn sent to ${id} was taken`);
      const after = await waitIdle(lb(), id, 30_000);
      const completed = after.turns_completed as number;
      assert.ok(completed >= record.sent && completed <= record.sent + record.unknown, `every turn of ${id} completed: ${completed} of ${record.sent} taken (+${record.unknown} unanswered)`);
      const turn = await api(lb(), 'POST', `/agents/${id}/send`, { prompt: 'say: still here' });
      assert.equal(turn.status, 200, JSON.stringify(turn.body));
      await waitFor(`${id}'s turn after the loss`, async () => (await api(lb(), 'GET', `/agents/${id}`)).body.turns_completed === completed + 1 || undefined, 60_000, 200);
    }
    assert.equal(await agentContainer(0, agents.one), containersBefore.get(agents.one), 'node-1\'s agent keeps its container');
    assert.equal(await agentContainer(1, agents.two), containersBefore.get(agents.two), 'node-2\'s agent keeps its container');
    const lost = await waitFor('the lost node\'s agent to be exited', async () => {
      const { body } = await api(lb(), 'GET', `/agents/${agents.lost}`);
      return body.status === 'exited' ? body : undefined;
    }, 30_000, 500);
    assert.match(JSON.stringify(lost), /node_lost/, JSON.stringify(lost));
  });

  test('a session last run on the lost node resumes on another node with its workspace and transcript', async () => {
    const resumed = await api(lb(), 'POST', '/run', { prompt: 'run: cat /workspace/marker.txt\nrecall:', engine: { session_id: sessionId, resume: true } });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.session_id, sessionId);
    const output = String(resumed.body.output);
    assert.match(output, new RegExp(`^${marker}$`, 'm'), `the workspace file written on node-3 is there: ${output}`);
    assert.match(output, new RegExp(`noted ${marker}`), `the transcript of node-3's run is there (recall): ${output}`);
  });

  test('an agent stream followed through the lost node, reconnected through HAProxy with Last-Event-ID: no gap, no duplicate', async () => {
    assert.ok(firstConnection, 'the first connection was opened');
    // node-3's death ends it (its socket closed by the kernel); 10 s at most.
    const ended = await Promise.race([firstConnection.done.then(() => 'ended', () => 'broken'), delay(10_000, 'still open')]);
    firstConnection.stop();
    assert.notEqual(ended, 'still open', 'the connection through node-3 ended with node-3');
    const got = firstConnection.frames.filter((f) => f.id !== undefined);
    assert.ok(got.length > 0, 'the first connection received events before the loss');
    // Followed until the turn's end, or 60 s at most (then what came is compared, and the end's absence named).
    const untilTurnEnd = async (headers: Record<string, string>) => {
      const connection = follow(`${lb()}/agents/${agents.streamed}/stream`, (frames) => frames.some((f) => f.event === 'turn_end' && f.data.turn_id === streamedTurn), headers);
      const timer = setTimeout(() => connection.stop(), 60_000);
      try {
        return (await connection.done).filter((f) => f.id !== undefined);
      } finally {
        clearTimeout(timer);
      }
    };
    const rest = await untilTurnEnd({ 'last-event-id': String(got.at(-1)!.id) });
    const log = await untilTurnEnd({ 'last-event-id': '0' });
    const received = [...got, ...rest].map((f) => ({ id: f.id!, event: f.event }));
    assert.deepEqual(streamProblems(received, log.map((f) => ({ id: f.id!, event: f.event }))), []);
    assert.ok(rest.some((f) => f.event === 'output' && JSON.stringify(f.data).includes('after the loss')), 'the turn\'s end was received after the reconnect');
  });

  test('Ctrl-C (SIGINT) of the cluster stops everything: nothing is left', async () => {
    const code = await cluster.stop('SIGINT', 120_000);
    assert.equal(code, 130, `the script exits as interrupted:\n${cluster.output().slice(-2000)}`);
    assert.deepEqual(await cluster.leftovers(), []);
  });
});
