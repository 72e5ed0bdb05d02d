// Replay, then live (core/events/replay.ts) over an agent that records into a real (in-memory) event log:
// a client that reconnects with the last id it got receives exactly what it missed, then live events; a
// slow subscriber's dropped events are sent again from the log; pruned ones are announced by events_lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from '../../src/core/agents/agent.js';
import type { AgentEvent } from '../../src/core/agents/agent-types.js';
import { StreamRecorder } from '../../src/core/events/stream-recorder.js';
import { replayThenLive, type EventsLostEvent } from '../../src/core/events/replay.js';
import { SqliteEventLog } from '../../src/store/events/sqlite-event-log.js';
import type { EventLog } from '../../src/store/events/event-log.js';

type Frame = (AgentEvent | EventsLostEvent) & { id?: number };
const READY = { kind: 'line' as const, text: '{"type":"control_response","response":{"subtype":"success","request_id":"berth-ready","response":{}}}' };
const out = (n: number) => ({ kind: 'line' as const, text: `{"type":"assistant","n":${n}}` });

function setUp(retention = { maxPerStream: 1_000, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }, subscriberBuffer?: number) {
  const log = new SqliteEventLog(':memory:', retention);
  const recorder = new StreamRecorder(log, 'agent:agent-1', (error) => assert.fail(String(error)));
  const agent = new Agent({
    id: 'agent-1', sessionId: 's', idleTimeoutSeconds: 60, idleTimeoutDisabled: false, write: async () => undefined, recorder,
    ...(subscriberBuffer !== undefined ? { subscriberBuffer } : {}),
  });
  agent.stdout(READY);
  const follow = (afterId: number | undefined) => {
    const live = agent.subscribe();
    const events = replayThenLive<AgentEvent>({ log, stream: 'agent:agent-1', afterId, live, fromLog: (s) => ({ ...(s.data as unknown as AgentEvent), id: s.id }), once: ['exited'] });
    return { live, events };
  };
  return { log, recorder, agent, follow };
}

async function collect(events: AsyncIterable<Frame>, until: (frames: Frame[]) => boolean): Promise<Frame[]> {
  const frames: Frame[] = [];
  for await (const frame of events) {
    frames.push(frame);
    if (until(frames)) break;
  }
  return frames;
}

const contents = (frames: Frame[]) => frames.map((f) => (f.type === 'output' ? f.content : f.type));

test('every recorded event is delivered live with an id that grows', async () => {
  const { agent, recorder, follow } = setUp();
  const { events } = follow(undefined);
  agent.stdout(out(1));
  agent.stdout(out(2));
  await recorder.flushed();
  const frames = await collect(events, (f) => f.length === 2);
  assert.deepEqual(contents(frames), ['{"type":"assistant","n":1}', '{"type":"assistant","n":2}']);
  assert.ok(frames[0]!.id! > 0 && frames[1]!.id! > frames[0]!.id!);
});

test('a reconnect with Last-Event-ID gets exactly the events it missed, then live ones', async () => {
  const { agent, recorder, follow } = setUp();
  const first = follow(undefined);
  for (let n = 1; n <= 3; n += 1) agent.stdout(out(n));
  await recorder.flushed();
  const seen = await collect(first.events, (f) => f.length === 2);
  first.live.close();
  // Missed: n=3 (sent while the first connection was leaving) and n=4..5 (while disconnected).
  for (let n = 4; n <= 5; n += 1) agent.stdout(out(n));
  await recorder.flushed();
  const second = follow(seen.at(-1)!.id);
  agent.stdout(out(6));
  const resumed = await collect(second.events, (f) => f.length === 4);
  assert.deepEqual(contents(resumed), [3, 4, 5, 6].map((n) => `{"type":"assistant","n":${n}}`));
  const ids = [...seen, ...resumed].map((f) => f.id!);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  assert.equal(new Set(ids).size, ids.length, 'no duplicate');
});

test('an event delivered while the reconnect reads the log is sent once', async () => {
  const { agent, log, follow } = setUp();
  // Appended but not yet delivered when the subscriber subscribes: in the log and live.
  const slowLog: EventLog = { ...log, after: async (...args) => { agent.stdout(out(99)); await new Promise((r) => setTimeout(r, 5)); return log.after(...args); }, append: log.append.bind(log), prune: log.prune.bind(log), removeStream: log.removeStream.bind(log), close: log.close.bind(log) };
  agent.stdout(out(1));
  const live = agent.subscribe();
  const events = replayThenLive<AgentEvent>({ log: slowLog, stream: 'agent:agent-1', afterId: 0, live, fromLog: (s) => ({ ...(s.data as unknown as AgentEvent), id: s.id }) });
  agent.stdout(out(2));
  const frames = await collect(events, (f) => f.length === 3);
  assert.deepEqual(contents(frames), [1, 2, 99].map((n) => `{"type":"assistant","n":${n}}`));
  assert.equal(new Set(frames.map((f) => f.id)).size, 3, 'three distinct events, none twice');
});

test('a subscriber whose buffer dropped events is sent them again from the log', async () => {
  const { agent, recorder, follow } = setUp(undefined, 4);
  const { live, events } = follow(0);
  for (let n = 1; n <= 20; n += 1) agent.stdout(out(n));
  await recorder.flushed();
  assert.ok(live.dropped > 0, 'the live buffer overflowed');
  const frames = await collect(events, (f) => f.length === 20);
  assert.deepEqual(contents(frames), Array.from({ length: 20 }, (_, i) => `{"type":"assistant","n":${i + 1}}`));
});

test('events no longer kept are announced by events_lost, then what is kept follows', async () => {
  const { agent, recorder, log, follow } = setUp({ maxPerStream: 3, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 });
  const first = follow(undefined);
  agent.stdout(out(1));
  await recorder.flushed();
  const [got] = await collect(first.events, () => true);
  first.live.close();
  for (let n = 2; n <= 8; n += 1) agent.stdout(out(n));
  await recorder.flushed();
  await log.prune(Date.now());
  const frames = await collect(follow(got!.id).events, (f) => f.length === 4);
  assert.equal(frames[0]!.type, 'events_lost');
  const lost = frames[0] as EventsLostEvent;
  assert.equal(lost.after, got!.id);
  assert.equal(frames[0]!.id, undefined, 'the notice has no id');
  assert.deepEqual(contents(frames.slice(1)), [6, 7, 8].map((n) => `{"type":"assistant","n":${n}}`));
  assert.ok(lost.lost_through < frames[1]!.id!);
});

test('an exited agent replays its events and its exited event once, then closes', async () => {
  const { agent, recorder, follow } = setUp();
  agent.stdout(out(1));
  agent.exit('agent: stopped by DELETE /agents/:id');
  await recorder.flushed();
  const frames = await collect(follow(0).events, () => false);
  assert.deepEqual(frames.map((f) => f.type), ['output', 'exited', 'closed']);
  assert.ok(frames[1]!.id !== undefined, 'the exited event has its id');
  assert.equal(frames[2]!.id, undefined);
});
