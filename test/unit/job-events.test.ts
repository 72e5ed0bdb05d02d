// A job's status changes as replayable events (core/jobs/job-events.ts) over real (in-memory) SQLite stores.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JobEvents, type JobStreamEvent } from '../../src/core/jobs/job-events.js';
import { SqliteEventLog } from '../../src/store/events/sqlite-event-log.js';
import { SqliteJobStore } from '../../src/store/jobs/sqlite-job-store.js';

const T = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();

function setUp(maxAgeMs = 3_600_000) {
  const log = new SqliteEventLog(':memory:', { maxPerStream: 100, maxAgeMs, maxBytesPerStream: 64 * 1024 * 1024 });
  const events = new JobEvents(log, (error) => assert.fail(String(error)));
  const store = events.recording(new SqliteJobStore(':memory:'));
  const insert = () => store.insert({ id: 'job-1', sessionId: 's', runId: 'run-1', webhookUrl: null, request: { prompt: 'x' }, owner: '', createdAt: T(0) });
  const follow = (afterId?: number) => events.follow('job-1', afterId, () => store.get('job-1'));
  return { log, store, insert, follow };
}

async function all(stream: { events: AsyncIterable<JobStreamEvent> }): Promise<JobStreamEvent[]> {
  const seen: JobStreamEvent[] = [];
  for await (const event of stream.events) seen.push(event);
  return seen;
}

const summary = (events: JobStreamEvent[]) => events.map((e) => (e.type === 'status' ? `${e.status}${e.id === undefined ? '' : '#'}` : e.type));

test('a follower sees the job\'s history, then its changes live, until its final status, then closed', async () => {
  const { store, insert, follow } = setUp();
  await insert();
  const stream = follow();
  const reading = all(stream);
  await store.transition('job-1', ['pending'], { status: 'running' }, T(1));
  await store.transition('job-1', ['running'], { status: 'failed', error: 'run failed: boom' }, T(2));
  const events = await reading;
  assert.deepEqual(summary(events), ['pending#', 'running#', 'failed#', 'closed']);
  assert.equal((events[2] as { error?: string }).error, 'run failed: boom');
  const ids = events.flatMap((e) => ('id' in e && e.id !== undefined ? [e.id] : []));
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
});

test('a reconnect with Last-Event-ID gets only the later events; a finished job\'s stream ends at once', async () => {
  const { store, insert, follow } = setUp();
  await insert();
  const [pending] = await all({ events: (async function* () { for await (const e of follow().events) { yield e; return; } })() });
  await store.transition('job-1', ['pending'], { status: 'running' }, T(1));
  await store.transition('job-1', ['running'], { status: 'completed', output: 'hi' }, T(2));
  const resumed = await all(follow((pending as { id: number }).id));
  assert.deepEqual(summary(resumed), ['running#', 'completed#', 'closed']);
});

test('when the log no longer keeps a finished job\'s events, events_lost, then its final status from the record', async () => {
  const { store, insert, follow, log } = setUp(1_000);
  await insert();
  await store.transition('job-1', ['pending'], { status: 'cancelled', error: 'cancelled' }, T(1));
  await new Promise((resolve) => setImmediate(resolve)); // the events appended
  await log.prune(Date.parse(T(100)));
  const events = await all(follow());
  assert.deepEqual(summary(events), ['events_lost', 'cancelled', 'closed']);
});

test('a follower that leaves ends its stream; the job goes on', async () => {
  const { store, insert, follow } = setUp();
  await insert();
  const stream = follow(0);
  const reading = all(stream);
  await new Promise((resolve) => setTimeout(resolve, 10));
  stream.close();
  const events = await reading;
  assert.equal(events[0]!.type, 'status');
  assert.equal((await store.transition('job-1', ['pending'], { status: 'running' }, T(1)))?.status, 'running');
});
