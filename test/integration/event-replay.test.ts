// Replayable agent events against a real Berth (a child process, real Podman, the real engine, a model
// outside the service): a client that drops its stream and reconnects with Last-Event-ID, also after a
// kill -9 and restart of the service, is sent exactly the events it missed (compared with the whole log,
// Last-Event-ID: 0: no gap, no duplicate); events no longer kept are announced; a bad Last-Event-ID is a 400.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';
import { follow as followStream, type Frame } from '../support/agents.js';

describe('agent streams resumed with Last-Event-ID', { timeout: 300_000 }, () => {
  let svc: ServiceProcess;
  let agentId: string;
  /** Every frame some connection of the test received, in the order received. */
  const received: Frame[] = [];

  before(async () => {
    svc = await serviceProcess({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
    await svc.start();
    const { status, body } = await svc.api('POST', '/agents', {});
    assert.equal(status, 200, JSON.stringify(body));
    agentId = body.id;
    await waitFor('the agent to be idle', async () => (await svc.api('GET', `/agents/${agentId}`)).body.status === 'idle' || undefined);
  });
  after(async () => {
    await svc?.dispose();
  });
  // A failed test leaves no stream open behind it (it would keep the file from ending).
  const open: { stop(): void }[] = [];
  const follow: typeof followStream = (...args) => {
    const handle = followStream(...args);
    open.push(handle);
    return handle;
  };
  afterEach(() => {
    for (const handle of open.splice(0)) handle.stop();
  });

  const streamUrl = () => `${svc.url()}/agents/${agentId}/stream`;
  const lastId = (frames: readonly Frame[]) => frames.filter((f) => f.id !== undefined).at(-1)!.id!;
  const turnsCompleted = async () => (await svc.api('GET', `/agents/${agentId}`)).body.turns_completed as number;

  async function send(prompt: string): Promise<string> {
    const { status, body } = await svc.api('POST', `/agents/${agentId}/send`, { prompt });
    assert.equal(status, 200, JSON.stringify(body));
    return body.turn_id;
  }

  /** Every event the log keeps for the agent (Last-Event-ID: 0), up to the end of turn `turnId`. */
  async function wholeLog(turnId: string): Promise<Frame[]> {
    const all = follow(streamUrl(), (frames) => frames.some((f) => f.event === 'turn_end' && f.data.turn_id === turnId), { 'last-event-id': '0' });
    return all.done;
  }

  function assertExactlyTheLog(log: readonly Frame[]): void {
    const ids = received.map((f) => f.id);
    assert.ok(ids.every((id) => id !== undefined), 'every agent event has an id');
    assert.equal(new Set(ids).size, ids.length, `no event was received twice: ${ids.join(',')}`);
    assert.deepEqual(
      received.map((f) => [f.id, f.event, f.data.turn_id, f.data.content]),
      log.map((f) => [f.id, f.event, f.data.turn_id, f.data.content]),
      'the connections together received the whole log, in order: no gap',
    );
  }

  test('a dropped stream reconnected with Last-Event-ID gets exactly the events it missed', async () => {
    // First connection: turn 1 whole, then turn 2 until its start; turn 2 goes on while nobody listens.
    let secondTurn = '';
    const first = follow(streamUrl(), (frames) => frames.some((f) => f.event === 'turn_start' && f.data.turn_id === secondTurn));
    await first.ready;
    const firstTurn = await send('say: one\nsay: two');
    await waitFor('turn 1 on the stream', async () => first.frames.some((f) => f.event === 'turn_end' && f.data.turn_id === firstTurn) || undefined, 60_000, 50);
    secondTurn = await send('say: three\nrun: /bin/sleep 1\nsay: four');
    const seen = await first.done;
    received.push(...seen);
    await waitFor('turn 2 to end while disconnected', async () => (await turnsCompleted()) === 2 || undefined, 60_000);

    // Reconnected: what was missed, then live (turn 3).
    const resumed = follow(streamUrl(), (frames) => frames.some((f) => f.event === 'turn_end' && f.data.turn_id === thirdTurn), { 'last-event-id': String(lastId(seen)) });
    await resumed.ready;
    let thirdTurn = '';
    const missed = await waitFor('the missed events', async () => resumed.frames.find((f) => f.event === 'turn_end' && f.data.turn_id === secondTurn), 30_000, 50);
    assert.ok(missed.id! > lastId(seen));
    thirdTurn = await send('say: five');
    received.push(...(await resumed.done));
    assert.ok(received.some((f) => f.event === 'output' && String(f.data.content).includes('four')), 'turn 2\'s output was missed and replayed');
    assertExactlyTheLog(await wholeLog(thirdTurn));
  });

  test('after a kill -9 and a restart, a reconnect gets what it missed before and after', async () => {
    let missedTurn = '';
    const before = follow(streamUrl(), (frames) => frames.some((f) => f.event === 'turn_start' && f.data.turn_id === missedTurn), { 'last-event-id': String(lastId(received)) });
    await before.ready;
    missedTurn = await send('say: six\nrun: /bin/sleep 1\nsay: seven');
    received.push(...(await before.done));
    await waitFor('the turn to end before the kill', async () => (await turnsCompleted()) === 4 || undefined, 60_000);
    await svc.signal('SIGKILL');
    await svc.start();
    await waitFor('the agent found again', async () => (await svc.api('GET', `/agents/${agentId}`)).body.status === 'idle' || undefined, 60_000);

    let afterTurn = '';
    const again = follow(streamUrl(), (frames) => frames.some((f) => f.event === 'turn_end' && f.data.turn_id === afterTurn), { 'last-event-id': String(lastId(received)) });
    await again.ready;
    await waitFor('the events missed before the kill', async () => again.frames.some((f) => f.event === 'turn_end' && f.data.turn_id === missedTurn) || undefined, 30_000, 50);
    afterTurn = await send('say: eight');
    received.push(...(await again.done));
    assert.ok(received.some((f) => f.event === 'output' && String(f.data.content).includes('seven')));
    assertExactlyTheLog(await wholeLog(afterTurn));
  });

  test('a job\'s stream: its history, then its changes; a reconnect with Last-Event-ID gets only the rest', async () => {
    const { status, body } = await svc.api('POST', '/run/async', { prompt: 'run: /bin/sleep 2\nsay: job done' });
    assert.equal(status, 200, JSON.stringify(body));
    const jobUrl = `${svc.url()}/jobs/${body.job_id}/stream`;
    const first = await follow(jobUrl, (frames) => frames.some((f) => f.data.status === 'running')).done;
    assert.deepEqual(first.map((f) => f.data.status), ['pending', 'running']);
    const rest = await follow(jobUrl, () => false, { 'last-event-id': String(lastId(first)) }).done;
    assert.deepEqual(rest.map((f) => f.event), ['status', 'closed']);
    assert.equal(rest[0]!.data.status, 'completed');
    assert.ok(rest[0]!.id! > lastId(first));
    const whole = await follow(jobUrl).done;
    assert.deepEqual(whole.map((f) => [f.id, f.data.status]), [...first, ...rest].map((f) => [f.id, f.data.status]), 'no gap, no duplicate');
    assert.match((await svc.api('GET', `/jobs/${body.job_id}`)).body.output, /job done/);
  });

  test('a Last-Event-ID that is not an event id is a 400 naming it; ?last_event_id= works as the header', async () => {
    const refused = await fetch(streamUrl(), { headers: { 'last-event-id': 'abc' } });
    assert.equal(refused.status, 400);
    const body = await refused.json();
    assert.equal(body.status, 'error');
    assert.match(body.error, /Last-Event-ID/);
    const byQuery = follow(`${streamUrl()}?last_event_id=${received[0]!.id}`, (frames) => frames.length >= 2);
    // The first two frames after the first event (a chunk read may hold more).
    const frames = (await byQuery.done).slice(0, 2);
    assert.deepEqual(frames.map((f) => f.id), received.slice(1, 3).map((f) => f.id));
  });

  test('events no longer kept are announced by events_lost, then the kept ones follow', async () => {
    // Restarted with a log of 3 events per stream: the start's prune leaves the agent's newest 3.
    await svc.signal('SIGKILL');
    await svc.start({ SERVICE_EVENTS_MAX_PER_STREAM: '3' });
    const frames = (await follow(streamUrl(), (f) => f.length >= 4, { 'last-event-id': String(received[0]!.id) }).done).slice(0, 4);
    assert.equal(frames[0]!.event, 'events_lost');
    assert.equal(frames[0]!.id, undefined);
    assert.equal(frames[0]!.data.after, received[0]!.id);
    assert.deepEqual(frames.slice(1).map((f) => f.id), received.slice(-3).map((f) => f.id), 'the newest three, kept');
    assert.ok(frames[0]!.data.lost_through < frames[1]!.id!);
    assert.equal((await svc.api('DELETE', `/agents/${agentId}`)).status, 204);
  });
});
