// Persistent agents end to end: real Podman, the real engine in stream-json input mode, the offline model.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, turnEnded, types, waitForStatus, type Frame } from '../support/agents.js';

describe('persistent agents', { timeout: 120_000 }, () => {
  let t: TestBerth;
  const streamUrl = (id: string) => `${t.url}/agents/${id}/stream`;

  before(async () => {
    t = await startTestBerth({ SERVICE_AGENT_IDLE_TICK: '200ms', SERVICE_SSE_HEARTBEAT_INTERVAL: '1s' });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), [], 'no agent container may outlive its agent');
  });
  after(async () => {
    await t.stop();
  });

  test('a first prompt streams turn_start, output and turn_end; a second turn recalls it in the same process and session', async () => {
    const spawned = await t.request('POST', '/agents', { prompt: 'say: the first answer' });
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const agent = spawned.body;
    assert.match(agent.id, /^agent-/);
    assert.equal(agent.status, 'starting');
    assert.equal(agent.turns_completed, 0);
    assert.equal(agent.idle_timeout_seconds, 1800);
    assert.equal('idle_timeout_disabled' in agent, false);
    assert.equal('exit_error' in agent, false);

    const first = follow(streamUrl(agent.id), (frames) => frames.some((f) => f.event === 'turn_end' || f.event === 'error'));
    const frames = await first.done;
    assert.deepEqual([types(frames)[0], types(frames).at(-1)], ['turn_start', 'turn_end'], JSON.stringify(frames));
    const turnId = frames[0]!.data.turn_id;
    assert.match(turnId, /^turn-/);
    for (const frame of frames) {
      assert.equal(frame.data.type, frame.event);
      assert.equal(frame.data.turn_id, turnId);
      assert.ok(!Number.isNaN(Date.parse(frame.data.at)));
    }
    const outputs = frames.filter((f) => f.event === 'output').map((f) => JSON.parse(f.data.content));
    assert.ok(outputs.some((line) => line.type === 'assistant' && JSON.stringify(line).includes('the first answer')));
    assert.equal(outputs.at(-1).type, 'result', 'output lines are the engine\'s stream-json, verbatim');

    const idle = await waitForStatus(t, agent.id, 'idle');
    assert.equal(idle.turns_completed, 1);
    assert.ok(Date.parse(idle.last_activity_at) >= Date.parse(agent.created_at));

    const second = follow(streamUrl(agent.id), (f) => f.some((x) => x.event === 'turn_end'));
    await second.ready;
    const sent = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'recall:' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.match(sent.body.turn_id, /^turn-/);
    const recall = await second.done;
    const answer = recall.filter((f) => f.event === 'output').map((f) => JSON.parse(f.data.content)).find((line) => line.type === 'result');
    assert.match(answer.result, /say: the first answer/);
    assert.equal(answer.session_id, agent.session_id, 'one engine process, one session');
    assert.equal((await waitForStatus(t, agent.id, 'idle')).turns_completed, 2);

    const sessions = await t.request('GET', '/sessions');
    assert.ok(!JSON.stringify(sessions.body).includes(agent.session_id), 'an agent\'s session is not listed');

    const listed = await t.request('GET', '/agents');
    assert.ok(listed.body.agents.some((a: any) => a.id === agent.id));

    const deleted = await t.request('DELETE', `/agents/${agent.id}`);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.body, '');
  });

  test('send is refused with 503 while starting and 409 while generating; DELETE ends the stream and later sends get 410', async () => {
    // Engine options no pre-started engine has: this agent starts its own engine (a pooled one is idle at once).
    const { body: agent } = await t.request('POST', '/agents', { engine: { model: 'claude-opus-4-1' } });
    assert.equal(agent.status, 'starting');
    const starting = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: too early' });
    assert.equal(starting.status, 503, JSON.stringify(starting.body));
    assert.equal(starting.body.status, 'error');
    await waitForStatus(t, agent.id, 'idle');

    const stream = follow(streamUrl(agent.id));
    await stream.ready;
    const { body: turn } = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'slow: 500\nsay: slowly' });
    const busy = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: overtaking' });
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    assert.equal((await t.request('GET', `/agents/${agent.id}`)).body.status, 'generating');
    await waitForStatus(t, agent.id, 'idle');

    const started = Date.now();
    const deleted = await t.request('DELETE', `/agents/${agent.id}`);
    assert.equal(deleted.status, 204);
    assert.ok(Date.now() - started < 5_000, 'the engine stops on SIGTERM without waiting for the kill');
    assert.deepEqual(await t.leftovers(), []);
    const frames = await stream.done;
    assert.deepEqual(types(frames).slice(-2), ['exited', 'closed']);
    assert.deepEqual(frames.at(-1)!.data, {});
    assert.ok(frames.some((f) => f.event === 'turn_end' && f.data.turn_id === turn.turn_id));

    const gone = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: anyone?' });
    assert.equal(gone.status, 410, JSON.stringify(gone.body));
    const snapshot = (await t.request('GET', `/agents/${agent.id}`)).body;
    assert.equal(snapshot.status, 'exited');
    assert.equal(typeof snapshot.exit_error, 'string');
  });

  test('a failed turn is an error event and the agent stays usable', async () => {
    const { body: agent } = await t.request('POST', '/agents', {});
    await waitForStatus(t, agent.id, 'idle');
    const stream = follow(streamUrl(agent.id), (f) => f.some((x) => x.event === 'error' && x.data.turn_id));
    await stream.ready;
    const { body: turn } = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'fail: overloaded' });
    const frames = await stream.done;
    const error = frames.find((f) => f.event === 'error' && f.data.turn_id === turn.turn_id);
    assert.ok(error && error.data.content.length > 0, JSON.stringify(frames.map((f) => f.event)));
    assert.ok(!frames.some((f) => f.event === 'turn_end'));
    const idle = await waitForStatus(t, agent.id, 'idle');
    assert.equal(idle.turns_completed, 0);
    const retry = await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: fine again' });
    assert.equal(retry.status, 200);
    assert.equal((await t.request('DELETE', `/agents/${agent.id}`)).status, 204);
  });

  test('an idle agent is stopped by the watchdog with "agent: idle timeout reached"', async () => {
    const { body: agent } = await t.request('POST', '/agents', { idle_timeout_seconds: 1 });
    assert.equal(agent.idle_timeout_seconds, 1);
    const stream = follow(streamUrl(agent.id));
    const frames = await stream.done;
    const exited = frames.find((f) => f.event === 'exited');
    assert.equal(exited?.data.content, 'agent: idle timeout reached');
    assert.equal(frames.at(-1)!.event, 'closed');
    const snapshot = (await t.request('GET', `/agents/${agent.id}`)).body;
    assert.equal(snapshot.status, 'exited');
    assert.equal(snapshot.exit_error, 'agent: idle timeout reached');
  });

  test('disable_idle_timeout shows in the snapshot; DELETE of an exited agent forgets it (then 404)', async () => {
    const { body: agent } = await t.request('POST', '/agents', { disable_idle_timeout: true, idle_timeout_seconds: 1 });
    assert.equal(agent.idle_timeout_disabled, true, JSON.stringify(agent));
    await waitForStatus(t, agent.id, 'idle');
    await delay(1_500);
    assert.equal((await t.request('GET', `/agents/${agent.id}`)).body.status, 'idle', 'no watchdog for this agent');
    assert.equal((await t.request('DELETE', `/agents/${agent.id}`)).status, 204);
    assert.equal((await t.request('DELETE', `/agents/${agent.id}`)).status, 204);
    assert.equal((await t.request('GET', `/agents/${agent.id}`)).status, 404);
    assert.equal((await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'x' })).status, 404);
  });

  test('invalid requests are refused before any container exists', async () => {
    const negative = await t.request('POST', '/agents', { idle_timeout_seconds: -1 });
    assert.equal(negative.status, 400);
    assert.match(negative.body.error, /idle_timeout_seconds/);
    assert.equal((await t.request('POST', '/agents', { workdir: '../etc' })).status, 400);
    // Of the container options an agent takes only container.network.
    assert.equal((await t.request('POST', '/agents', { container: { memory: '1g' } })).status, 400);
    for (const [method, path] of [['GET', '/agents/agent-nope'], ['GET', '/agents/agent-nope/stream'], ['DELETE', '/agents/agent-nope']] as const) {
      assert.equal((await t.request(method, path)).status, 404, `${method} ${path}`);
    }
    assert.equal((await t.request('POST', '/agents/agent-nope/send', { prompt: 'x' })).status, 404);
    assert.equal((await t.request('POST', '/agents/agent-nope/send', {})).status, 400);
  });
});

test('service shutdown stops live agents and removes their containers', { timeout: 60_000 }, async () => {
  const own = await startTestBerth();
  const { body: agent } = await own.request('POST', '/agents', { disable_idle_timeout: true });
  const stream = follow(`${own.url}/agents/${agent.id}/stream`);
  await waitForStatus(own, agent.id, 'idle');
  assert.equal((await own.leftovers()).length, 1);
  await own.stop();
  const frames = await stream.done;
  assert.deepEqual(frames.slice(-2).map((f) => [f.event, f.data.content]), [
    ['exited', 'agent: stopped because the service is shutting down'],
    ['closed', undefined],
  ]);
  const { stdout } = await promisify(execFile)('podman', ['ps', '-a', '--filter', `label=berth.instance=${own.config.instanceName}`, '--format', '{{.Names}}']);
  assert.equal(stdout.trim(), '');
});
