// Runs, sessions, the pool and agents with workspaces, on real Podman with the real engine and the offline
// model: what a run writes at its workdir persists with its session (the issue's own repro, with the pool on
// and off), a named workspace's uploads are at the workdir and the run's writes come back through the API,
// a fork works on a copy, deleting a session removes its own workspace but not a caller's, one run at a time
// per workspace, an agent holds its workspace while it lives, and runs with workspaces stay pool hits.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, afterEach, before, describe, it } from 'node:test';
import { metric, poolReady, startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, turnEnded, waitForStatus } from '../support/agents.js';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';

/** Mounts left at a run disk's workdir (a workspace bound there and never taken away). */
async function workdirBinds(t: TestBerth): Promise<string[]> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  const runs = `${t.config.agent.sessionsDir}/.runs/`;
  return table.split('\n').map((line) => line.split(' ')[4] ?? '').filter((path) => path.startsWith(runs) && path.endsWith('/.berth-writable/workdir'));
}

/** The workspace a session owns (made for it), from the caller's list. */
async function ownWorkspace(t: TestBerth, sessionId: string): Promise<string> {
  const list = await t.request('GET', '/workspaces');
  assert.equal(list.status, 200, JSON.stringify(list.body));
  const own = (list.body.workspaces as { id: string; owner_session: string | null }[]).find((ws) => ws.owner_session === sessionId);
  assert.ok(own, `session ${sessionId} has a workspace of its own among ${JSON.stringify(list.body.workspaces)}`);
  return own.id;
}

async function fileOf(t: TestBerth, workspace: string, path: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${t.url}/workspaces/${workspace}/files/${path}`);
  return { status: response.status, text: await response.text() };
}

async function newWorkspace(t: TestBerth): Promise<string> {
  const created = await t.request('POST', '/workspaces', {});
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.id as string;
}

async function upload(t: TestBerth, workspace: string, path: string, content: string): Promise<void> {
  const response = await fetch(`${t.url}/workspaces/${workspace}/files/${path}`, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: content });
  assert.equal(response.status, 201, await response.text());
}

const hits = (t: TestBerth) => metric(t, 'berth_pool_hits_total{pool="run"}');

for (const poolSize of [1, 0]) {
  describe(`a session's work persists (pool ${poolSize > 0 ? 'on' : 'off'})`, () => {
    let t: TestBerth;
    before(async () => {
      t = await startTestBerth({ SERVICE_POOL_SIZE: String(poolSize), SERVICE_AGENT_POOL_SIZE: String(poolSize) });
    });
    afterEach(async () => {
      assert.deepEqual(await t.leftovers(), []);
      assert.deepEqual(await workdirBinds(t), [], 'no workspace stays bound at a run\'s workdir');
    });
    after(async () => {
      await t?.stop();
    });

    it(`an agent${poolSize > 0 ? ' from the agents\' pool' : ''} holds its session's own workspace and gives it back when deleted`, async () => {
      if (poolSize > 0) await poolReady(t, poolSize, 'agent');
      const agentHits = await metric(t, 'berth_pool_hits_total{pool="agent"}');
      const spawned = await t.request('POST', '/agents', { prompt: 'run: echo kept > agent.txt' });
      assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
      assert.equal(await metric(t, 'berth_pool_hits_total{pool="agent"}'), agentHits + poolSize, poolSize > 0 ? 'a pooled agent' : 'no pool');
      await waitForStatus(t, spawned.body.id, 'idle');
      const workspace = await ownWorkspace(t, spawned.body.session_id);
      assert.equal((await t.request('GET', `/workspaces/${workspace}`)).body.in_use, true, 'held while the agent lives');
      assert.equal((await t.request('DELETE', `/agents/${spawned.body.id}`)).status, 204);
      // Given back with the agent (a pooled agent released only the engine's own session and kept it held).
      const givenBack = await waitFor('the workspace given back', async () => {
        const view = await t.request('GET', `/workspaces/${workspace}`);
        return view.body.in_use === false ? view : undefined;
      }, 10_000);
      assert.equal(givenBack.status, 200);
      assert.equal((await fileOf(t, workspace, 'agent.txt')).text, 'kept\n');
    });

    it('a resume sees what the session\'s earlier run wrote at its workdir (the issue\'s repro)', async () => {
      if (poolSize > 0) await poolReady(t, 1);
      const before = await hits(t);
      // Relative paths: a pooled engine's working directory is the workspace too, not the directory it started in.
      const first = await t.request('POST', '/run', { prompt: 'run: echo kept > notes.txt && echo written' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.match(first.body.output, /written/);
      if (poolSize > 0) assert.equal(await hits(t), before + 1, 'the run with a session-owned workspace took a pooled engine');
      const resumed = await t.request('POST', '/run', { prompt: 'run: cat /workspace/notes.txt', engine: { session_id: first.body.session_id, resume: true } });
      assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
      assert.match(resumed.body.output, /kept/);
      const own = await ownWorkspace(t, first.body.session_id);
      assert.deepEqual(await fileOf(t, own, 'notes.txt'), { status: 200, text: 'kept\n' });
    });

    it('a run with a named workspace sees its uploads and leaves its writes for the API', async () => {
      const workspace = await newWorkspace(t);
      await upload(t, workspace, 'src/input.txt', 'uploaded');
      if (poolSize > 0) await poolReady(t, 1);
      const before = await hits(t);
      const run = await t.request('POST', '/run', { prompt: 'run: cat src/input.txt && echo result > out.txt && mkdir -p made && echo deep > made/file', workspace });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.match(run.body.output, /uploaded/);
      if (poolSize > 0) assert.equal(await hits(t), before + 1, 'the run with a named workspace took a pooled engine');
      assert.deepEqual(await fileOf(t, workspace, 'out.txt'), { status: 200, text: 'result\n' });
      assert.deepEqual(await fileOf(t, workspace, 'made/file'), { status: 200, text: 'deep\n' });
      const view = await t.request('GET', `/workspaces/${workspace}`);
      assert.deepEqual(view.body.sessions, [run.body.session_id]);
      assert.equal(view.body.in_use, false);
      // The session keeps it: a continue of that session without naming it works in it again.
      const again = await t.request('POST', '/run', { prompt: 'run: cat out.txt', engine: { session_id: run.body.session_id, resume: true } });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.match(again.body.output, /result/);
    });

    if (poolSize > 0) {
      it('a workspace with the engine\'s project files (CLAUDE.md) gets an engine started for it, not a pooled one', async () => {
        const workspace = await newWorkspace(t);
        await upload(t, workspace, 'CLAUDE.md', 'Project instructions.');
        await poolReady(t, 1);
        const [hitsBefore, missesBefore] = [await hits(t), await metric(t, 'berth_pool_misses_total{pool="run",reason="workspace"}')];
        const run = await t.request('POST', '/run', { prompt: 'run: cat CLAUDE.md', workspace });
        assert.equal(run.status, 200, JSON.stringify(run.body));
        assert.match(run.body.output, /Project instructions/);
        assert.equal(await hits(t), hitsBefore);
        assert.equal(await metric(t, 'berth_pool_misses_total{pool="run",reason="workspace"}'), missesBefore + 1);
      });
    }
  });
}

describe('workspaces of sessions, forks, agents and concurrent runs', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
    assert.deepEqual(await workdirBinds(t), [], 'no workspace stays bound at a run\'s workdir');
  });
  after(async () => {
    await t?.stop();
  });

  it('a fork works on a copy: its writes do not change its parent\'s workspace', async () => {
    const parent = await t.request('POST', '/run', { prompt: 'run: echo parent > notes.txt' });
    assert.equal(parent.status, 200, JSON.stringify(parent.body));
    const fork = await t.request('POST', '/run', {
      prompt: 'run: cat notes.txt && echo forked > notes.txt',
      engine: { session_id: parent.body.session_id, fork_session: true },
    });
    assert.equal(fork.status, 200, JSON.stringify(fork.body));
    assert.match(fork.body.output, /parent/, 'the fork starts from its parent\'s files');
    const parentWorkspace = await ownWorkspace(t, parent.body.session_id);
    const forkWorkspace = await ownWorkspace(t, fork.body.session_id);
    assert.notEqual(forkWorkspace, parentWorkspace);
    assert.equal((await fileOf(t, parentWorkspace, 'notes.txt')).text, 'parent\n');
    assert.equal((await fileOf(t, forkWorkspace, 'notes.txt')).text, 'forked\n');
  });

  it('a resume naming another workspace than its session\'s is refused naming workspace', async () => {
    const first = await t.request('POST', '/run', { prompt: 'say: one' });
    const other = await newWorkspace(t);
    const refused = await t.request('POST', '/run', { prompt: 'say: two', workspace: other, engine: { session_id: first.body.session_id, resume: true } });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(refused.body.error, /^workspace: /);
  });

  it('DELETE /sessions/:id removes the session\'s own workspace but not a caller\'s', async () => {
    const own = await t.request('POST', '/run', { prompt: 'run: echo mine > mine.txt' });
    const ownId = await ownWorkspace(t, own.body.session_id);
    const given = await newWorkspace(t);
    const withGiven = await t.request('POST', '/run', { prompt: 'run: echo theirs > theirs.txt', workspace: given });
    assert.equal(withGiven.status, 200, JSON.stringify(withGiven.body));
    assert.equal((await t.request('DELETE', `/sessions/${own.body.session_id}`)).status, 200);
    assert.equal((await t.request('GET', `/workspaces/${ownId}`)).status, 404);
    assert.equal((await t.request('DELETE', `/sessions/${withGiven.body.session_id}`)).status, 200);
    const kept = await t.request('GET', `/workspaces/${given}`);
    assert.equal(kept.status, 200);
    assert.deepEqual(kept.body.sessions, []);
    assert.equal((await fileOf(t, given, 'theirs.txt')).text, 'theirs\n');
  });

  it('two runs at once on one workspace: one runs, the other is refused with 409 and leaves nothing', async () => {
    const workspace = await newWorkspace(t);
    const [a, b] = await Promise.all([
      t.request('POST', '/run', { prompt: 'run: sleep 1 && echo a >> log.txt', workspace }),
      t.request('POST', '/run', { prompt: 'run: sleep 1 && echo b >> log.txt', workspace }),
    ]);
    const statuses = [a.status, b.status].sort();
    assert.deepEqual(statuses, [200, 409], `${JSON.stringify(a.body)} ${JSON.stringify(b.body)}`);
    const refused = a.status === 409 ? a : b;
    assert.match(refused.body.error, new RegExp(`workspace ${workspace} is in use`));
    assert.equal((await fileOf(t, workspace, 'log.txt')).text.trim().split('\n').length, 1, 'only one run wrote');
  });

  it('an agent holds its workspace while it lives', async () => {
    const workspace = await newWorkspace(t);
    const spawned = await t.request('POST', '/agents', { workspace });
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    await waitForStatus(t, spawned.body.id, 'idle');
    assert.equal((await t.request('GET', `/workspaces/${workspace}`)).body.in_use, true);
    const busy = await t.request('DELETE', `/workspaces/${workspace}`);
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    const run = await t.request('POST', '/run', { prompt: 'say: no', workspace });
    assert.equal(run.status, 409, JSON.stringify(run.body));
    assert.equal((await t.request('DELETE', `/agents/${spawned.body.id}`)).status, 204);
    assert.equal((await t.request('DELETE', `/workspaces/${workspace}`)).status, 200);
  });
});

describe('an agent\'s workspace across a restart', { timeout: 300_000 }, () => {
  let svc: ServiceProcess;
  before(async () => {
    svc = await serviceProcess({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });
  after(async () => {
    await svc?.dispose();
  });

  /** Binds left at a run disk's workdir of the service's directory. */
  const binds = async () => {
    const table = await readFile('/proc/self/mountinfo', 'utf8');
    return table.split('\n').map((line) => line.split(' ')[4] ?? '').filter((path) => path.startsWith(`${svc.dir}/`) && path.endsWith('/.berth-writable/workdir'));
  };

  it('an agent followed again after a kill -9 holds its workspace again, works in it, and gives it back when deleted', async () => {
    await svc.start();
    const workspace = (await svc.api('POST', '/workspaces', {})).body.id as string;
    const { body: agent } = await svc.api('POST', '/agents', { workspace, prompt: 'run: echo before > note.txt' });
    await waitFor('the agent idle after its first turn', async () => {
      const snapshot = (await svc.api('GET', `/agents/${agent.id}`)).body;
      return snapshot.status === 'idle' && snapshot.turns_completed === 1 ? snapshot : undefined;
    });
    await svc.signal('SIGKILL');
    await svc.start();
    const held = await svc.api('GET', `/workspaces/${workspace}`);
    assert.equal(held.body.in_use, true, 'held again for the agent it follows');
    assert.equal((await svc.api('DELETE', `/workspaces/${workspace}`)).status, 409);
    const stream = follow(`${svc.url()}/agents/${agent.id}/stream`);
    await stream.ready;
    const sent = await svc.api('POST', `/agents/${agent.id}/send`, { prompt: 'run: cat note.txt && echo after >> note.txt' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await waitFor('the turn to end', async () => turnEnded(sent.body.turn_id)(stream.frames) || undefined, 60_000, 50);
    stream.stop();
    assert.match(stream.frames.filter((f) => f.event === 'output').map((f) => String(f.data.content)).join('\n'), /before/);
    assert.equal((await svc.api('DELETE', `/agents/${agent.id}`)).status, 204);
    assert.deepEqual(await binds(), [], 'the bind went with the agent');
    const file = await fetch(`${svc.url()}/workspaces/${workspace}/files/note.txt`);
    assert.equal(await file.text(), 'before\nafter\n');
    assert.equal((await svc.api('DELETE', `/workspaces/${workspace}`)).status, 200);
    await svc.signal('SIGTERM');
    assert.deepEqual(svc.containers(), []);
  });
});
