// Work that outlives its Berth process: jobs followed again and agents found again after a kill -9, a sync
// run's session kept, and the three shutdown modes (SERVICE_SHUTDOWN_MODE) with a job and an agent in flight.
// Real Podman, the real engine, a model outside the service. Each case ends with no container of the instance
// left.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';
import { follow, turnEnded } from '../support/agents.js';

const FINISHED = new Set(['completed', 'failed', 'crashed', 'cancelled']);

describe('work across restarts and shutdown modes', { timeout: 600_000 }, () => {
  let svc: ServiceProcess;
  before(async () => {
    // Pre-started engines are removed at every stop; counting containers is simpler without them.
    svc = await serviceProcess({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });
  after(async () => {
    await svc?.dispose();
  });

  const agentSnapshot = async (id: string) => (await svc.api('GET', `/agents/${id}`)).body;
  const jobOf = (id: string) => waitFor(`job ${id} to finish`, async () => {
    const { body } = await svc.api('GET', `/jobs/${id}`);
    return FINISHED.has(body.status) ? body : undefined;
  }, 120_000);

  /** A job's row in the (stopped) service's own job database, for what the API does not show. */
  const jobRecord = (id: string) => {
    const db = new Database(join(svc.dir, 'data', 'jobs.db'), { readonly: true });
    try {
      return db.prepare('SELECT run_id FROM jobs WHERE id = ?').get(id) as { run_id: string };
    } finally {
      db.close();
    }
  };

  /** A container's state (running, exited, ...) through the podman CLI. */
  const stateOf = (name: string) => execFileSync('podman', ['inspect', '--format', '{{.State.Status}}', name], { encoding: 'utf8' }).trim();
  /** The command lines of a container's processes, one a line. */
  const processesOf = (name: string) => execFileSync('podman', ['top', name, 'args'], { encoding: 'utf8' });

  /** Sends a turn and waits for its turn_end on the agent's stream; returns the output text. */
  async function turn(id: string, prompt: string): Promise<string> {
    const stream = follow(`${svc.url()}/agents/${id}/stream`);
    await stream.ready;
    const sent = await svc.api('POST', `/agents/${id}/send`, { prompt });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await waitFor('the turn to end', async () => turnEnded(sent.body.turn_id)(stream.frames) || undefined, 60_000, 50).catch((error: Error) => {
      throw new Error(`${error.message}; frames: ${JSON.stringify(stream.frames).slice(-1500)}\n${svc.diagnose(id)}`);
    });
    stream.stop();
    return stream.frames.filter((f) => f.event === 'output').map((f) => String(f.data.content)).join('\n');
  }

  /**
   * Sends a turn that sleeps 12 s, kills the service 2 s into it, starts it again (with `env`), and waits for
   * the turn, still the agent's after the restart, to end; returns the agent's snapshot then.
   */
  async function killMidTurnAndRestart(id: string, env?: Record<string, string>): Promise<any> {
    // 12 s: the restart (a new Podman service, the agent and its workspace held again) must be over before the
    // turn is; with two test files at work on 2 cores a 6 s turn sometimes ended first.
    await svc.api('POST', `/agents/${id}/send`, { prompt: 'run: /bin/sleep 12\nsay: after the sleep' });
    await waitFor('generating', async () => (await agentSnapshot(id)).status === 'generating' || undefined);
    // Killed while the turn's sleep runs in the agent's container, not before the engine reached it.
    await waitFor('the turn\'s sleep to run', async () => svc.containers().some((name) => processesOf(name).includes('/bin/sleep 12')) || undefined, 60_000);
    await svc.signal('SIGKILL');
    await svc.start(env);
    assert.equal((await agentSnapshot(id)).status, 'generating', 'the turn in progress is still the agent\'s');
    return waitFor('the turn to end after the restart', async () => {
      const snapshot = await agentSnapshot(id);
      return snapshot.status === 'idle' ? snapshot : undefined;
    }, 60_000);
  }

  test('after a kill -9 an idle agent is the same agent and still usable; a gone one is exited and says why', async () => {
    await svc.start();
    const { body: kept } = await svc.api('POST', '/agents', { prompt: 'say: before the kill' });
    const { body: lost } = await svc.api('POST', '/agents', {});
    await waitFor('both agents idle', async () => (await agentSnapshot(kept.id)).status === 'idle' && (await agentSnapshot(lost.id)).status === 'idle' || undefined);
    assert.equal((await agentSnapshot(kept.id)).turns_completed, 1);

    await svc.signal('SIGKILL');
    assert.equal(svc.containers().length, 2, 'agent containers outlive the killed service');
    const lostContainer = svc.containers().find((name) => name.includes(lost.id.replace(/^agent-/, '')) || name.endsWith(lost.id))!;
    assert.ok(lostContainer, `the container of ${lost.id} among ${svc.containers().join(', ')}`);
    try {
      execFileSync('podman', ['rm', '-f', lostContainer], { stdio: 'ignore' });
    } catch {
      // Podman 4.3 may report a busy shm mount; the container is removed all the same (checked below).
    }
    assert.ok(!svc.containers().includes(lostContainer), 'the agent\'s container is gone');

    await svc.start();
    const again = await agentSnapshot(kept.id);
    assert.equal(again.status, 'idle', JSON.stringify(again));
    assert.equal(again.session_id, kept.session_id);
    assert.equal(again.turns_completed, 1);
    assert.equal(again.created_at, kept.created_at);
    assert.match(await turn(kept.id, 'recall:'), /before the kill/, 'the same engine process, with its history');
    assert.equal((await agentSnapshot(kept.id)).turns_completed, 2);

    const gone = await agentSnapshot(lost.id);
    assert.equal(gone.status, 'exited');
    assert.match(gone.exit_error, /container was gone when the service restarted/);

    assert.equal((await svc.api('DELETE', `/agents/${kept.id}`)).status, 204);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('a kill -9 mid-turn: the restarted service ends the turn with turn_end or finds it ended', async () => {
    await svc.start();
    const { body: agent } = await svc.api('POST', '/agents', {});
    await waitFor('idle', async () => (await agentSnapshot(agent.id)).status === 'idle' || undefined);
    const done = await killMidTurnAndRestart(agent.id);
    assert.equal(done.turns_completed, 1);
    assert.equal((await svc.api('DELETE', `/agents/${agent.id}`)).status, 204);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('an agent from the pool, killed mid-turn: its warm-up is no turn, and its results stay numbered as a fresh engine\'s', async () => {
    await svc.start({ SERVICE_AGENT_POOL_SIZE: '1' });
    // A pooled engine is ready once it ended its blank warm-up turn (its result is in the container's log).
    await waitFor('a warmed engine in the agent pool', async () => svc.containers().some((name) => {
      try {
        return execFileSync('podman', ['logs', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).includes('"type":"result"');
      } catch {
        return false;
      }
    }) || undefined, 60_000, 200);
    const { body: agent } = await svc.api('POST', '/agents', {});
    assert.equal(agent.status, 'idle', 'the agent took the pooled engine');
    const resultIndexes = (output: string) => [...output.matchAll(/"type":"result"[^\n]*?"result_index":(\d+)|"result_index":(\d+)[^\n]*?"type":"result"/g)].map((m) => Number(m[1] ?? m[2]));
    assert.deepEqual(resultIndexes(await turn(agent.id, 'say: first pooled')), [0], 'the first turn\'s result is the first result');

    // Restarted without a pool: the agent's record says what its engine printed before its first turn.
    const done = await killMidTurnAndRestart(agent.id);
    assert.equal(done.turns_completed, 2, 'two turns, the warm-up not among them');

    await svc.signal('SIGKILL');
    await svc.start();
    const idle = await agentSnapshot(agent.id);
    assert.equal(idle.status, 'idle', JSON.stringify(idle));
    assert.equal(idle.turns_completed, 2);
    const third = await turn(agent.id, 'recall:');
    assert.match(third, /first pooled[\s\S]*after the sleep/, 'the same engine, with its history');
    assert.deepEqual(resultIndexes(third), [2], 'numbered as a fresh engine numbers its third result');
    assert.equal((await agentSnapshot(agent.id)).turns_completed, 3);
    assert.equal((await svc.api('DELETE', `/agents/${agent.id}`)).status, 204);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('SERVICE_SHUTDOWN_MODE=detach leaves a job and an agent running; the next start completes the job and keeps the agent', async () => {
    await svc.start({ SERVICE_SHUTDOWN_MODE: 'detach' });
    const { body: agent } = await svc.api('POST', '/agents', { prompt: 'say: detached agent' });
    await waitFor('idle', async () => (await agentSnapshot(agent.id)).status === 'idle' || undefined);
    const { body: job } = await svc.api('POST', '/run/async', { prompt: 'say: before the detach\nrun: /bin/sleep 5\nsay: after the detach' });
    await waitFor('the job to run', async () => (await svc.api('GET', `/jobs/${job.job_id}`)).body.status === 'running' || undefined);
    await waitFor('the job\'s sleep to run', async () => processesOf(`berth-${jobRecord(job.job_id).run_id}`).includes('/bin/sleep 5') || undefined, 60_000);
    const stopping = Date.now();
    await svc.signal('SIGTERM');
    assert.ok(Date.now() - stopping < 15_000, `a detach is quick (${Date.now() - stopping} ms)`);
    assert.equal(svc.containers().length, 2, 'the job and the agent run on');

    await svc.start();
    const finished = await jobOf(job.job_id);
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    assert.match(finished.output, /before the detach[\s\S]*after the detach/);
    assert.match(await turn(agent.id, 'recall:'), /detached agent/);
    assert.equal((await svc.api('DELETE', `/agents/${agent.id}`)).status, 204);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('SERVICE_SHUTDOWN_MODE=drain refuses new work with 503 and lets a running job finish before exiting', async () => {
    await svc.start({ SERVICE_SHUTDOWN_MODE: 'drain', SERVICE_SHUTDOWN_DRAIN_TIMEOUT: '2m' });
    const { body: job } = await svc.api('POST', '/run/async', { prompt: 'say: draining\nrun: /bin/sleep 4\nsay: drained' });
    await waitFor('the job to run', async () => (await svc.api('GET', `/jobs/${job.job_id}`)).body.status === 'running' || undefined);
    const stopped = svc.signal('SIGTERM');
    const refused = await waitFor('new work to be refused', async () => {
      const response = await svc.api('POST', '/run', { prompt: 'say: too late' });
      return response.status === 503 ? response : undefined;
    }, 10_000, 50);
    assert.deepEqual(Object.keys(refused.body).sort(), ['error', 'status']);
    assert.match(refused.body.error, /shutting down/);
    await stopped;
    assert.deepEqual(svc.containers(), []);
    await svc.start();
    const finished = await jobOf(job.job_id);
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    assert.match(finished.output, /drained/);
    await svc.signal('SIGTERM');
  });

  test('after a kill -9 a job whose container still runs is followed again and completes with its full output', async () => {
    await svc.start();
    const submitted = await svc.api('POST', '/run/async', { prompt: 'say: before the kill\nrun: /bin/sleep 8\nsay: survived the restart' });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    const jobId: string = submitted.body.job_id;
    await waitFor('the job container to run', async () => (await svc.api('GET', `/jobs/${jobId}`)).body.status === 'running' && svc.containers().length === 1);
    await waitFor('the engine at its Bash tool', async () => processesOf(`berth-${jobRecord(jobId).run_id}`).includes('/bin/sleep 8') || undefined, 60_000);

    await svc.signal('SIGKILL');
    assert.equal(svc.containers().length, 1, 'the container outlives the killed service');

    await svc.start();
    const done = await jobOf(jobId);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.match(done.output, /before the kill[\s\S]*survived the restart/, 'the whole output, from before and after the restart');
    const messages = await svc.api('GET', `/sessions/${submitted.body.session_id}/messages?limit=500`);
    assert.equal(messages.status, 200, 'the session kept its transcript');
    assert.ok(messages.body.messages.some((m: { content: string }) => m.content.includes('survived the restart')));
    await waitFor('the container to be removed', async () => svc.containers().length === 0 || undefined);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('a job whose container exited while the service was down is finished from its log; one whose container is gone crashes', async () => {
    await svc.start();
    const quick = await svc.api('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    const lost = await svc.api('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    const [quickId, lostId] = [quick.body.job_id as string, lost.body.job_id as string];
    await waitFor('both job containers to run', async () => svc.containers().length === 2 || undefined);
    const quickContainer = `berth-${jobRecord(quickId).run_id}`;
    // Killed while the job's engine is at its tool: the job has output in its log, and no result yet.
    await waitFor('the quick job\'s sleep to run', async () => processesOf(quickContainer).includes('/bin/sleep 600') || undefined, 60_000);
    await svc.signal('SIGKILL');
    // While the service is down: one container ends, the other is removed by someone else. The engine cannot
    // finish its work by itself now (it reaches the model through the service's gateway, which is down with
    // it), so it is ended as the OOM killer or an operator would, and the test waits until it has exited: the
    // service finds it exited, not running, when it is back.
    execFileSync('podman', ['kill', '--signal', 'TERM', quickContainer], { stdio: 'ignore' });
    await waitFor('the quick job\'s container to exit while the service is down', async () => stateOf(quickContainer) === 'exited' || undefined, 60_000);
    const lostContainer = `berth-${jobRecord(lostId).run_id}`;
    try {
      execFileSync('podman', ['rm', '-f', lostContainer], { stdio: 'ignore' });
    } catch {
      // Podman 4.3 may report a busy shm mount of a user-namespaced container it removes all the same.
    }
    await waitFor('the container to be gone', async () => !svc.containers().includes(lostContainer) || undefined);

    await svc.start();
    const quickDone = await jobOf(quickId);
    // Finished as its exit says, with what its log holds (the tool call the engine was at).
    assert.equal(quickDone.status, 'crashed', JSON.stringify(quickDone).slice(0, 500));
    assert.deepEqual({ ...quickDone.crash_info, partial_output: undefined }, { exit_code: 143, signal: 'SIGTERM', partial_output: undefined, task_completed: false, reason: 'signal' });
    assert.match(quickDone.crash_info.partial_output, /"command":"\/bin\/sleep 600"/, 'read from the exited container\'s log');
    assert.match(quickDone.error, /killed by SIGTERM/);
    const lostDone = (await svc.api('GET', `/jobs/${lostId}`)).body;
    assert.equal(lostDone.status, 'crashed', JSON.stringify(lostDone));
    assert.deepEqual(lostDone.crash_info, { exit_code: -1, signal: '', partial_output: '', task_completed: false, reason: 'service_restart' });
    assert.match(lostDone.error, /container was gone/);
    assert.equal((await svc.api('DELETE', `/jobs/${lostId}`)).status, 409);
    await waitFor('no container left', async () => svc.containers().length === 0 || undefined);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('a sync run cut off by a kill -9 keeps what the engine wrote in its session, to be resumed', async () => {
    await svc.start();
    const marker = `cut-off-${randomBytes(4).toString('hex')}`;
    const before = new Set(((await svc.api('GET', '/sessions')).body.sessions as { id: string }[]).map((session) => session.id));
    const pending = fetch(`${svc.url()}/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: `say: ${marker}\nrun: /bin/sleep 600` }),
    }).catch(() => undefined);
    await waitFor('the run container to run', async () => svc.containers().length === 1 || undefined);
    await waitFor('the engine at its Bash tool', async () => processesOf(svc.containers()[0]!).includes('/bin/sleep 600') || undefined, 60_000);
    await svc.signal('SIGKILL');
    await pending;

    await svc.start();
    assert.deepEqual(svc.containers(), [], 'a sync run is not followed again: its container is reaped');
    const sessions = ((await svc.api('GET', '/sessions')).body.sessions as { id: string }[]).filter((session) => !before.has(session.id));
    assert.equal(sessions.length, 1, 'the run\'s session is there');
    const messages = await svc.api('GET', `/sessions/${sessions[0]!.id}/messages?limit=500`);
    assert.ok(messages.body.messages.some((m: { content: string }) => m.content.includes(marker)), 'with what the engine wrote before the kill');
    const resumed = await svc.api('POST', '/run', { prompt: 'recall:', engine: { session_id: sessions[0]!.id, resume: true } });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.match(resumed.body.output, new RegExp(marker));
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });

  test('the default stop mode still cancels: a running job is crashed by the stop and nothing is left', async () => {
    await svc.start();
    const { body: job } = await svc.api('POST', '/run/async', { prompt: 'run: /bin/sleep 600' });
    await waitFor('the job to run', async () => (await svc.api('GET', `/jobs/${job.job_id}`)).body.status === 'running' || undefined);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
    await svc.start();
    const finished = await jobOf(job.job_id);
    assert.equal(finished.status, 'crashed');
    assert.equal(finished.crash_info.reason, 'service_stop');
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });
});
