// Pre-started engines on real Podman: a default run takes a pooled engine and answers like a run whose
// container was made for it; other requests miss by reason; timeout, OOM and cancellation of a pooled run
// behave as for any run; a rotated credential, a dead pooled engine and a stop are handled; nothing is
// left behind.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { metric, modelUrlFromHost, poolReady, startTestBerth, type TestBerth } from '../support/berth.js';
import { INSTANCE_LABEL } from '../../src/runtime/container-runtime.js';
import { follow, turnEnded, waitForStatus } from '../support/agents.js';
import { waitFor } from '../support/wait.js';
import { waitingCpuShares } from '../../src/core/pool/engine-pool.js';
import { REFILL_MAX_POSTPONED } from '../../src/core/pool/refill-schedule.js';
import { transcriptFiles } from '../../src/engine/transcript.js';

const exec = promisify(execFile);

/** A container's CPU weight as its cgroup has it (cgroup v1 `cpu.shares`; v2 `cpu.weight`, converted back). */
async function cpuShares(container: string): Promise<number> {
  const pid = (await exec('podman', ['inspect', '--format', '{{.State.Pid}}', container])).stdout.trim();
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.find((line) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(line));
  if (v1) return Number((await readFile(`/sys/fs/cgroup/cpu/${v1.split(':')[2]}/cpu.shares`, 'utf8')).trim());
  const weight = Number((await readFile(`/sys/fs/cgroup/${lines.find((line) => line.startsWith('0::'))!.slice(3)}/cpu.weight`, 'utf8')).trim());
  // Podman's conversion: weight = 1 + (shares - 2) * 9999 / 262142.
  return Math.round(((weight - 1) * 262142) / 9999 + 2);
}

/** Containers of an instance, through the podman CLI (also after the Berth stopped). */
async function containersOf(instance: string): Promise<string[]> {
  const { stdout } = await exec('podman', ['ps', '-a', '--filter', `label=${INSTANCE_LABEL}=${instance}`, '--format', '{{.Names}}']);
  return stdout.split('\n').filter(Boolean);
}

/** Stores `value` as the Podman secret `name`: the engine credential of a test Berth. */
const createSecret = (name: string, value: string) =>
  exec('sh', ['-c', `printf '%s' "$VALUE" | podman secret create ${name} -`], { env: { ...process.env, VALUE: value } });

/** The records of a session's main transcript, as the session keeps them. */
async function transcriptRecords(t: TestBerth, sessionId: string): Promise<Record<string, unknown>[]> {
  // A run is answered at its result; its transcript is carried back right after (reading the session waits for it).
  assert.equal((await t.request('GET', `/sessions/${sessionId}/messages`)).status, 200);
  const files = await transcriptFiles(join(t.config.agent.sessionsDir, sessionId), sessionId);
  const main = files.find((file) => file.endsWith(`/${sessionId}.jsonl`));
  assert.ok(main, `the transcript of ${sessionId} among ${files.join(', ')}`);
  const text = await readFile(main, 'utf8');
  return text.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The conversation a transcript holds: its records that are nodes of the message tree (they have a uuid), in order. */
const conversation = (records: Record<string, unknown>[]) =>
  records
    .filter((record) => typeof record.uuid === 'string')
    .map((record) => `${String(record.type)}${record.type === 'attachment' ? `:${String((record.attachment as { type?: unknown } | undefined)?.type)}` : ''}`);

/** The kinds of a transcript's other records: the engine's bookkeeping (queue, request shapes, costs, title). */
const bookkeeping = (records: Record<string, unknown>[]) => [...new Set(records.filter((record) => typeof record.uuid !== 'string').map((record) => String(record.type)))].sort();

/** A test Berth whose engines authenticate with the secret `secret` to a model listening on the host at `port`. */
async function berthWithModel(secret: string, port: number, env: Record<string, string>): Promise<TestBerth> {
  return startTestBerth({
    ...env,
    SERVICE_OFFLINE_MODEL: 'false',
    SERVICE_ENGINE_CREDENTIALS_SECRET: secret,
    SERVICE_ENGINE_BASE_URL: modelUrlFromHost(port),
  });
}

describe('a pooled run is a run', () => {
  let pooled: TestBerth;
  let fresh: TestBerth;
  before(async () => {
    pooled = await startTestBerth({ SERVICE_POOL_SIZE: '2' });
    fresh = await startTestBerth({ SERVICE_POOL_SIZE: '0' });
  });
  after(async () => {
    await pooled?.stop();
    await fresh?.stop();
  });

  it('answers like a run without the pool: output, usage, a resumable session with its history and title', async () => {
    await poolReady(pooled, 2);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const hit = await pooled.request('POST', '/run', { prompt: 'say: twin' });
    const miss = await fresh.request('POST', '/run', { prompt: 'say: twin' });
    assert.equal(hit.status, 200, JSON.stringify(hit.body));
    assert.equal(miss.status, 200, JSON.stringify(miss.body));
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 1, 'the run took a pooled engine');
    assert.deepEqual(Object.keys(hit.body).sort(), Object.keys(miss.body).sort());
    assert.equal(hit.body.output, miss.body.output);
    assert.deepEqual(hit.body.usage, miss.body.usage);
    assert.match(hit.body.id, /^run-/);
    // The session's transcript holds what a fresh engine's holds: the same conversation, record by record
    // in order, the prompt its root (the waiting engine's blank warm-up turn is nowhere in it), and the same
    // kinds of bookkeeping records. How many bookkeeping records there are is the engine's timing, not the
    // pool's: it flushes `last-prompt`/`atis-latch` pairs on a timer, and a fresh engine on a busy host
    // writes an extra pair as often as a pooled one.
    const [hitRecords, missRecords] = await Promise.all([transcriptRecords(pooled, hit.body.session_id), transcriptRecords(fresh, miss.body.session_id)]);
    assert.deepEqual(conversation(hitRecords), conversation(missRecords));
    assert.deepEqual(bookkeeping(hitRecords), bookkeeping(missRecords));
    for (const records of [hitRecords, missRecords]) {
      assert.deepEqual({ ...records[0] }, { ...records[0], type: 'queue-operation', operation: 'enqueue', content: 'say: twin' });
      assert.equal(records.find((r) => r.type === 'user')?.parentUuid, null);
      assert.ok(!records.some((r) => r.type === 'system'), 'no notice of a blank prompt');
    }

    const resumed = await pooled.request('POST', '/run', { prompt: 'recall:', engine: { session_id: hit.body.session_id, resume: true } });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.output, 'say: twin');
    const forked = await pooled.request('POST', '/run', { prompt: 'recall:', engine: { session_id: hit.body.session_id, fork_session: true } });
    assert.equal(forked.body.output, 'say: twin\nrecall:', 'the fork carries the session as resumed');

    const titles = async (t: TestBerth, id: string) => (await t.request('GET', '/sessions')).body.sessions.find((s: { id: string }) => s.id === id)?.title;
    assert.equal(await titles(pooled, hit.body.session_id), 'say: twin');
    assert.equal(await titles(pooled, hit.body.session_id), await titles(fresh, miss.body.session_id));
    const messages = await pooled.request('GET', `/sessions/${hit.body.session_id}/messages`);
    assert.deepEqual(messages.body.messages.map((m: { role: string }) => m.role).slice(0, 2), ['user', 'assistant']);
    assert.deepEqual(await pooled.leftovers(), []);
  });

  it('output_format stream-json: the same events, the result numbered as a fresh engine numbers it', async () => {
    await poolReady(pooled, 1);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const request = { prompt: 'say: raw lines', engine: { output_format: 'stream-json' } };
    const hit = await pooled.request('POST', '/run', request);
    const miss = await fresh.request('POST', '/run', request);
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 1, 'the run took a pooled engine');
    const events = (output: string) => output.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const [hitEvents, missEvents] = [events(hit.body.output), events(miss.body.output)];
    const kinds = (list: Record<string, unknown>[]) => list.map((e) => `${String(e.type)}${e.subtype === undefined ? '' : `/${String(e.subtype)}`}`);
    assert.deepEqual(kinds(hitEvents), kinds(missEvents));
    const result = (list: Record<string, unknown>[]) => list.find((e) => e.type === 'result')!;
    assert.equal(result(hitEvents).result_index, 0);
    assert.equal(result(hitEvents).result_index, result(missEvents).result_index);
    assert.equal(result(hitEvents).num_turns, result(missEvents).num_turns);
    assert.equal(result(hitEvents).result, 'raw lines');
  });

  it('streams and async jobs take pooled engines too', async () => {
    await poolReady(pooled, 2);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const stream = await fetch(`${pooled.url}/run/stream?prompt=${encodeURIComponent('say: streamed')}`);
    const events = await stream.text();
    assert.match(events, /streamed/);
    const job = await pooled.request('POST', '/run/async', { prompt: 'say: queued' });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    let status = '';
    for (let i = 0; i < 100 && status !== 'completed'; i++) {
      status = (await pooled.request('GET', `/jobs/${job.body.job_id}`)).body.status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 'completed');
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 2);
  });

  it('other requests miss, counted by reason, and still run', async () => {
    const first = await pooled.request('POST', '/run', { prompt: 'say: one' });
    const cases: [Record<string, unknown>, string][] = [
      [{ prompt: 'say: again', engine: { session_id: first.body.session_id, resume: true } }, 'session'],
      [{ prompt: 'say: big', container: { memory: '1g' } }, 'limits'],
      [{ prompt: 'say: model', engine: { model: 'claude-haiku-4-5' } }, 'engine_options'],
      [{ prompt: 'say: elsewhere', workdir: '/tmp/elsewhere' }, 'workdir'],
    ];
    for (const [request, reason] of cases) {
      const before = await metric(pooled, `berth_pool_misses_total{pool="run",reason="${reason}"}`);
      const response = await pooled.request('POST', '/run', request);
      assert.equal(response.status, 200, `${reason}: ${JSON.stringify(response.body)}`);
      assert.equal(await metric(pooled, `berth_pool_misses_total{pool="run",reason="${reason}"}`), before + 1, reason);
    }
  });

  it('timeout and cancellation of a pooled run end as for any run, and leave nothing', async () => {
    await poolReady(pooled, 2);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const timedOut = await pooled.request('POST', '/run', { prompt: 'run: /bin/sleep 600', container: { timeout: '3s' } });
    assert.equal(timedOut.status, 500);
    assert.match(timedOut.body.error, /timed out after 3s/);

    await poolReady(pooled, 1);
    const job = await pooled.request('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    for (let i = 0; i < 100; i++) {
      if ((await pooled.request('GET', `/jobs/${job.body.job_id}`)).body.status === 'running') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal((await pooled.request('DELETE', `/jobs/${job.body.job_id}`)).status, 200);
    let status = '';
    for (let i = 0; i < 100 && status !== 'cancelled'; i++) {
      status = (await pooled.request('GET', `/jobs/${job.body.job_id}`)).body.status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 'cancelled');
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 2, 'both ran in pooled engines');
    assert.deepEqual(await pooled.leftovers(), []);
  });

  it('out of memory in a pooled engine ends as in a container made for the run: the killed command, or the run killed (500, out of memory)', async () => {
    const outcome = (response: { status: number; body: Record<string, unknown> }) =>
      response.status === 200 ? `200 ${String(response.body.output).includes('Killed') ? 'Killed' : String(response.body.output).slice(0, 200)}` : `${response.status} ${JSON.stringify(response.body)}`;
    // At the default 512m the kernel's OOM killer picks the memory hog, not the engine: the engine reports
    // the killed command and answers 200.
    await poolReady(pooled, 1);
    let hits = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const hog = { prompt: 'run: head -c 3000m /dev/zero | tail' };
    const [hogPooled, hogFresh] = [await pooled.request('POST', '/run', hog), await fresh.request('POST', '/run', hog)];
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hits + 1, 'the run took a pooled engine');
    assert.equal(outcome(hogPooled), '200 Killed');
    assert.equal(outcome(hogFresh), '200 Killed');

    // Five holders of 90 MB each (every one smaller than the engine's own 130 MB or so) fill the 512m
    // container: the OOM killer takes the biggest process, the engine (PID 1), and the container dies by the
    // kernel's SIGKILL, which Berth must tell from any other kill in a pooled engine as in a fresh one
    // (exit-classification.ts).
    await poolReady(pooled, 1);
    hits = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const killed = { prompt: 'run: for i in 1 2 3 4 5; do (head -c 90m /dev/zero; sleep 30) | tail -c 91m > /dev/null & done; wait' };
    const [killedPooled, killedFresh] = [await pooled.request('POST', '/run', killed), await fresh.request('POST', '/run', killed)];
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hits + 1, 'the run took a pooled engine');
    const expected = `500 ${JSON.stringify({ error: 'run was killed for running out of memory (container.memory 512m); the container was removed', status: 'error' })}`;
    assert.equal(outcome(killedPooled), expected);
    assert.equal(outcome(killedFresh), expected);
    assert.deepEqual(await pooled.leftovers(), []);
  });

  it('runs back to back all take pooled engines: a run that finds none ready waits for the one being started', async () => {
    await poolReady(pooled, 2);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const emptyBefore = await metric(pooled, 'berth_pool_misses_total{pool="run",reason="empty"}');
    // Back to back, a run often comes before the pool has refilled.
    for (let i = 0; i < 8; i++) {
      const response = await pooled.request('POST', '/run', { prompt: `say: back to back ${i}` });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.output, `back to back ${i}`);
    }
    assert.equal(await metric(pooled, 'berth_pool_misses_total{pool="run",reason="empty"}'), emptyBefore, 'no run found the pool empty');
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 8);
    assert.deepEqual(await pooled.leftovers(), []);
  });

  it('an engine starts at an eighth of a run\'s CPU weight, and waits and runs at the run\'s own', async () => {
    const runShares = pooled.config.agent.defaultCpuShares;
    // Empty the pool, then watch a refill: starting engines have the low weight until they are ready.
    await poolReady(pooled, 2);
    await Promise.all([0, 1].map((i) => pooled.request('POST', '/run', { prompt: `say: drain ${i}` })));
    const isReady = (id: string) => pooled.berth.pools.run.readyContainers().includes(id);
    const starting = await waitFor('an engine being started', async () => {
      for (const name of pooled.berth.pools.run.ownContainerNames()) {
        const id = (await exec('podman', ['inspect', '--format', '{{.Id}}', name]).catch(() => undefined))?.stdout.trim();
        if (!id || isReady(id)) continue;
        const shares = await cpuShares(id).catch(() => undefined);
        // Read while the engine was still starting (it becomes ready in the same tick its weight is raised).
        if (shares !== undefined && !isReady(id)) return shares;
      }
      return undefined;
    });
    assert.equal(starting, waitingCpuShares(runShares));
    await poolReady(pooled, 2);
    for (const id of pooled.berth.pools.run.readyContainers()) assert.equal(await cpuShares(id), runShares);
    const hitsBefore = await metric(pooled, 'berth_pool_hits_total{pool="run"}');
    const job = await pooled.request('POST', '/run/async', { prompt: 'run: /bin/sleep 4\nsay: weighed' });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const running = await waitFor('the job\'s container', async () => {
      const pool = new Set(pooled.berth.pools.ownContainerNames());
      return (await containersOf(pooled.config.instanceName)).find((name) => !pool.has(name));
    });
    assert.equal(await cpuShares(running), runShares);
    const done = await waitFor('the job', async () => {
      const current = (await pooled.request('GET', `/jobs/${job.body.job_id}`)).body;
      return current.status === 'running' || current.status === 'pending' ? undefined : current;
    });
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(await metric(pooled, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 1, 'the job took a pooled engine');
  });

  it('a pooled engine that died while waiting is replaced, never handed to a run', async () => {
    await poolReady(pooled, 2);
    const [victim] = pooled.berth.pools.run.readyContainers();
    await exec('podman', ['kill', victim!]);
    const deadline = Date.now() + 10_000;
    while (pooled.berth.pools.run.readyContainers().includes(victim!) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(!pooled.berth.pools.run.readyContainers().includes(victim!), 'the dead engine left the pool');
    for (let i = 0; i < 3; i++) {
      const response = await pooled.request('POST', '/run', { prompt: `say: after ${i}` });
      assert.equal(response.status, 200, JSON.stringify(response.body));
    }
    await poolReady(pooled, 2);
  });
});

describe('a pooled agent is an agent', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '1' });
  });
  after(async () => {
    await t?.stop();
  });

  it('is idle as soon as it is spawned, takes turns in one session, and is removed on delete', async () => {
    await poolReady(t, 1, 'agent');
    const hitsBefore = await metric(t, 'berth_pool_hits_total{pool="agent"}');
    const spawned = await t.request('POST', '/agents', {});
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    assert.equal(spawned.body.status, 'idle', 'a pre-started engine answered its handshake already');
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="agent"}'), hitsBefore + 1);
    const id: string = spawned.body.id;
    assert.match(id, /^agent-/);

    for (const [index, text] of ['first pooled turn', 'second pooled turn'].entries()) {
      const stream = follow(`${t.url}/agents/${id}/stream`);
      await stream.ready;
      const sent = await t.request('POST', `/agents/${id}/send`, { prompt: `say: ${text}` });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const frames = await Promise.race([
        (async () => {
          while (!turnEnded(sent.body.turn_id)(stream.frames)) await new Promise((resolve) => setTimeout(resolve, 20));
          return stream.frames;
        })(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the turn did not end')), 30_000)),
      ]);
      stream.stop();
      assert.ok(frames.some((f) => f.event === 'turn_end'), JSON.stringify(frames));
      assert.ok(frames.some((f) => f.event === 'output' && String(f.data.content).includes(text)), JSON.stringify(frames));
      // Results numbered as a fresh engine numbers them: the warm-up's blank turn had the first number.
      const results = frames.filter((f) => f.event === 'output').map((f) => JSON.parse(String(f.data.content)) as { type: string; result_index?: number }).filter((e) => e.type === 'result');
      assert.deepEqual(results.map((e) => e.result_index), [index]);
      assert.equal((await waitForStatus(t, id, 'idle')).turns_completed, index + 1);
    }
    const sessions = (await t.request('GET', '/sessions')).body.sessions as { id: string }[];
    assert.ok(!sessions.some((session) => session.id === spawned.body.session_id), 'an agent\'s session is hidden, as without the pool');

    assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
    assert.deepEqual(await t.leftovers(), []);
  });

  it('sends its first prompt at once, and an agent that needs another engine misses by reason and starts its own', async () => {
    await poolReady(t, 1, 'agent');
    const spawned = await t.request('POST', '/agents', { prompt: 'say: first from the pool' });
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    assert.equal(spawned.body.status, 'generating', 'the first turn is under way when the spawn answers');
    assert.equal((await waitForStatus(t, spawned.body.id, 'idle')).turns_completed, 1);

    const missesBefore = await metric(t, 'berth_pool_misses_total{pool="agent",reason="engine_options"}');
    const own = await t.request('POST', '/agents', { engine: { model: 'claude-opus-4-1' } });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.equal(own.body.status, 'starting');
    assert.equal(await metric(t, 'berth_pool_misses_total{pool="agent",reason="engine_options"}'), missesBefore + 1);
    await waitForStatus(t, own.body.id, 'idle');

    for (const id of [spawned.body.id, own.body.id]) assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
    assert.deepEqual(await t.leftovers(), []);
  });

  it('a stop with a full agent pool leaves no container and no unused session', async () => {
    await poolReady(t, 1, 'agent');
    const instance = t.config.instanceName;
    const sessionsDir = t.config.agent.sessionsDir;
    const { sessionIds } = t.berth.pools.ownFiles();
    assert.equal(sessionIds.length, 1, 'the ready engine\'s session');
    await t.berth.stop();
    assert.deepEqual(await containersOf(instance), []);
    const { stdout } = await exec('find', [sessionsDir, '-maxdepth', '1', '-name', '*-*-*-*-*']);
    // The deleted agents' sessions stay (hidden), as without the pool; the pooled engine's, never used, is gone.
    for (const id of sessionIds) assert.ok(!stdout.includes(id), `${id} is left in ${stdout}`);
  });
});

describe('refilling after claims pause', () => {
  /** A pause long enough that the case can tell runs that follow each other from a pause. */
  const REFILL_PAUSE_MS = 4_000;
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '2', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_POOL_REFILL_PAUSE: `${REFILL_PAUSE_MS}ms` });
  });
  after(async () => {
    await t?.stop();
  });

  /** Engines the pool holds (ready or being started) stay at most `count` for `ms`. */
  async function holdsAtMost(count: number, ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      const held = t.berth.pools.ownContainerNames().length;
      assert.ok(held <= count, `the pool started an engine while claims went on: ${held} held, at most ${count} expected`);
      await delay(100);
    }
  }

  it('starts no engine while runs follow each other; a run that finds none starts its own; the pool refills in the pause', async () => {
    await poolReady(t, 2);
    const hitsBefore = await metric(t, 'berth_pool_hits_total{pool="run"}');
    const run = async (i: number) => {
      const response = await t.request('POST', '/run', { prompt: `say: close together ${i}` });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.output, `close together ${i}`);
    };
    await run(1);
    await holdsAtMost(1, 1_000);
    await run(2);
    await holdsAtMost(0, 1_000);
    // Nothing ready: this run starts the engine it takes, and is still a hit.
    await run(3);
    assert.equal(await metric(t, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 3);
    assert.equal(await metric(t, 'berth_pool_misses_total{pool="run",reason="empty"}'), 0);
    await holdsAtMost(0, 1_000);
    // Four seconds after the last claim the pool starts what it lacks; on a host whose CPUs stay busy, after
    // at most REFILL_MAX_POSTPONED more such pauses.
    await poolReady(t, 2, 'run', (REFILL_MAX_POSTPONED + 1) * REFILL_PAUSE_MS + 30_000);
    assert.deepEqual(await t.leftovers(), []);
  });
});

describe('the warm-up of a waiting engine', () => {
  it('asks the model nothing and leaves nothing in the session: a pooled run makes one model request', async () => {
    // The warm-up is a context-usage request and a blank turn (engine/warm-up.ts): neither may reach the model.
    const key = `sk-berth-test-${randomBytes(12).toString('hex')}`;
    const name = `test-pool-warm-${randomBytes(4).toString('hex')}`;
    const requests: string[] = [];
    const model: OfflineModel = await startOfflineModel({
      host: '0.0.0.0', port: 0, apiKey: key, log: (line) => void (line.includes(' from ') && requests.push(line)),
    });
    await createSecret(name, key);
    const t = await berthWithModel(name, model.port, { SERVICE_POOL_SIZE: '2', SERVICE_AGENT_POOL_SIZE: '1' });
    try {
      await poolReady(t, 2);
      await poolReady(t, 1, 'agent');
      assert.deepEqual(requests, [], 'three engines warmed up without a model request');
      const hitsBefore = await metric(t, 'berth_pool_hits_total{pool="run"}');
      const response = await t.request('POST', '/run', { prompt: 'say: warm' });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(await metric(t, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 1);
      assert.equal(requests.length, 1, requests.join('\n'));
      // The session holds the turn only: the warm-up's request and answer are nowhere in it.
      await t.request('GET', `/sessions/${response.body.session_id as string}/messages`);
      const files = await transcriptFiles(join(t.config.agent.sessionsDir, response.body.session_id), response.body.session_id);
      const transcript = (await Promise.all(files.map((file) => readFile(file, 'utf8')))).join('');
      assert.doesNotMatch(transcript, /get_context_usage|berth-warm|berth-ready|Blank prompt/);
      const types = transcript.trim().split('\n').map((line) => (JSON.parse(line) as { type: string }).type);
      assert.equal(types.filter((type) => type === 'user').length, 1);
      assert.equal(types.filter((type) => type === 'api-request').length, 1);
    } finally {
      await t.stop();
      await model.close();
      await exec('podman', ['secret', 'rm', name]).catch(() => undefined);
    }
  });
});

describe('credentials and stopping', () => {
  it('a rotated engine credential is used by the gateway within seconds; pooled engines, which hold none, stay', async () => {
    const value = `sk-berth-test-${randomBytes(12).toString('hex')}`;
    const name = `test-pool-credential-${randomBytes(4).toString('hex')}`;
    const model: OfflineModel = await startOfflineModel({ host: '127.0.0.1', port: 0, apiKey: value });
    await createSecret(name, value);
    const t = await berthWithModel(name, model.port, { SERVICE_POOL_SIZE: '2' });
    try {
      await poolReady(t, 2);
      assert.equal((await t.request('POST', '/run', { prompt: 'say: before' })).status, 200);
      await poolReady(t, 2);
      // Rotated: the model now accepts only the new value, which only the secret holds.
      await exec('podman', ['secret', 'rm', name]);
      const rotated = `sk-berth-test-${randomBytes(12).toString('hex')}`;
      await createSecret(name, rotated);
      await model.close();
      const next: OfflineModel = await startOfflineModel({ host: '127.0.0.1', port: model.port, apiKey: rotated });
      try {
        // The gateway notices the new secret within its 5 s check; the engines made before are still good.
        const ready = t.berth.pools.run.readyContainers();
        assert.equal(ready.length, 2);
        await new Promise((resolve) => setTimeout(resolve, 7_000));
        const hitsBefore = await metric(t, 'berth_pool_hits_total{pool="run"}');
        const response = await t.request('POST', '/run', { prompt: 'say: after' });
        assert.equal(response.status, 200, JSON.stringify(response.body));
        assert.equal(response.body.output, 'after');
        assert.equal(await metric(t, 'berth_pool_hits_total{pool="run"}'), hitsBefore + 1, 'an engine made before the rotation served the run');
      } finally {
        await next.close();
      }
    } finally {
      await t.stop();
      await exec('podman', ['secret', 'rm', name]).catch(() => undefined);
    }
  });

  it('a stop with a full pool leaves no container, and no unused pooled session', async () => {
    const t = await startTestBerth({ SERVICE_POOL_SIZE: '3', SERVICE_AGENT_POOL_SIZE: '1' });
    const instance = t.config.instanceName;
    await poolReady(t, 3);
    await poolReady(t, 1, 'agent');
    assert.equal((await containersOf(instance)).length, 4);
    const sessionsDir = t.config.agent.sessionsDir;
    await t.berth.stop();
    assert.deepEqual(await containersOf(instance), []);
    const { stdout } = await exec('find', [sessionsDir, '-maxdepth', '1', '-name', '*-*-*-*-*']);
    assert.equal(stdout.trim(), '', 'the pooled engines\' sessions, never used, are gone');
    await t.stop();
  });
});
