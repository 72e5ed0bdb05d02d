// Live events recorded by another node (core/events/log-feeds.ts, issue 26): two JobEvents over one event log
// and one job store stand for two nodes on one database. Node A accepts the job, node B runs it; A's follower
// gets B's statuses when the log announces them (the announcements here stand for PostgreSQL's NOTIFY), or by
// the slow poll when none comes, in order and each once, also those A recorded itself and was told about.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LogFeeds } from '../../src/core/events/log-feeds.js';
import { JobEvents, type JobStreamEvent } from '../../src/core/jobs/job-events.js';
import type { EventLog, StoredEvent } from '../../src/store/events/event-log.js';
import type { EventNotice, EventNotices } from '../../src/store/events/event-notices.js';
import { parseEventNotice } from '../../src/store/events/event-notices.js';
import { SqliteEventLog } from '../../src/store/events/sqlite-event-log.js';
import { SqliteJobStore } from '../../src/store/jobs/sqlite-job-store.js';

const T = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();

/** Announces every append after it, as the events table's trigger does at commit; `silent`: announces nothing. */
class AnnouncingLog {
  private readonly listeners = new Set<(notice: EventNotice) => void>();

  constructor(readonly log: EventLog, private readonly silent = false) {}

  notices(): EventNotices {
    let on: ((notice: EventNotice) => void) | undefined;
    return {
      start: (listener) => {
        on = listener;
        this.listeners.add(listener);
        listener({ kind: 'listening' });
      },
      stop: async () => void (on && this.listeners.delete(on)),
    };
  }

  wrapped(): EventLog {
    const log = this.log;
    return {
      append: async (stream, type, data, atMs): Promise<StoredEvent> => {
        const stored = await log.append(stream, type, data, atMs);
        if (!this.silent) setImmediate(() => this.listeners.forEach((on) => on({ kind: 'appended', stream, id: stored.id })));
        return stored;
      },
      after: (stream, afterId, limit) => log.after(stream, afterId, limit),
      prune: (nowMs) => log.prune(nowMs),
      removeStream: (stream) => log.removeStream(stream),
      close: () => log.close(),
    };
  }
}

function twoNodes({ silent = false, pollMs = 60_000 } = {}) {
  const shared = new AnnouncingLog(new SqliteEventLog(':memory:', { maxPerStream: 100, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }), silent);
  const log = shared.wrapped();
  const jobs = new SqliteJobStore(':memory:');
  const feeds = new LogFeeds(pollMs);
  feeds.start(shared.notices());
  const fail = (error: unknown) => assert.fail(String(error));
  const eventsA = new JobEvents(log, fail, Date.now, feeds);
  const eventsB = new JobEvents(log, fail);
  const storeA = eventsA.recording(jobs);
  const storeB = eventsB.recording(jobs);
  return { eventsA, storeA, storeB, feeds };
}

async function all(stream: { events: AsyncIterable<JobStreamEvent> }): Promise<JobStreamEvent[]> {
  const seen: JobStreamEvent[] = [];
  for await (const event of stream.events) seen.push(event);
  return seen;
}

const summary = (events: JobStreamEvent[]) => events.map((e) => (e.type === 'status' ? `${e.status}#${e.id}` : e.type));

async function acceptOnAThenRunOnB(nodes: ReturnType<typeof twoNodes>): Promise<JobStreamEvent[]> {
  const { eventsA, storeA, storeB } = nodes;
  await storeA.insert({ id: 'job-1', sessionId: 's', runId: 'run-1', webhookUrl: null, request: { prompt: 'x' }, owner: '', createdAt: T(0) });
  const reading = all(eventsA.follow('job-1', undefined, () => storeA.get('job-1')));
  await new Promise((resolve) => setTimeout(resolve, 20));
  await storeB.transition('job-1', ['pending'], { status: 'running' }, T(1));
  await new Promise((resolve) => setTimeout(resolve, 20));
  await storeB.transition('job-1', ['running'], { status: 'completed' }, T(2));
  return reading;
}

test('a follower on A gets the statuses B records, by the log\'s announcements, in order and each once', async () => {
  const nodes = twoNodes();
  const events = await acceptOnAThenRunOnB(nodes);
  assert.deepEqual(events.map((e) => (e.type === 'status' ? e.status : e.type)), ['pending', 'running', 'completed', 'closed']);
  const ids = events.flatMap((e) => (e.type === 'status' ? [e.id!] : []));
  assert.ok(ids.every((id, n) => n === 0 || id > ids[n - 1]!), summary(events).join(' '));
  await nodes.feeds.stop();
});

test('without announcements (a LISTEN connection that died silently), the poll brings B\'s statuses', async () => {
  const nodes = twoNodes({ silent: true, pollMs: 30 });
  // The poll's timer does not hold the process open (a server's other work does); the test's does.
  const alive = setInterval(() => undefined, 1_000);
  const events = await acceptOnAThenRunOnB(nodes).finally(() => clearInterval(alive));
  assert.deepEqual(events.map((e) => (e.type === 'status' ? e.status : e.type)), ['pending', 'running', 'completed', 'closed']);
  await nodes.feeds.stop();
});

test('without feeds (no shared log), B\'s statuses never reach A\'s follower: the feeds are what delivers them', async () => {
  const shared = new AnnouncingLog(new SqliteEventLog(':memory:', { maxPerStream: 100, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }));
  const log = shared.wrapped();
  const jobs = new SqliteJobStore(':memory:');
  const eventsA = new JobEvents(log, (error) => assert.fail(String(error)));
  const storeA = eventsA.recording(jobs);
  const storeB = new JobEvents(log, (error) => assert.fail(String(error))).recording(jobs);
  await storeA.insert({ id: 'job-1', sessionId: 's', runId: 'run-1', webhookUrl: null, request: { prompt: 'x' }, owner: '', createdAt: T(0) });
  const stream = eventsA.follow('job-1', undefined, () => storeA.get('job-1'));
  const reading = all(stream);
  await storeB.transition('job-1', ['pending'], { status: 'running' }, T(1));
  await new Promise((resolve) => setTimeout(resolve, 100));
  stream.close();
  assert.deepEqual((await reading).map((e) => (e.type === 'status' ? e.status : e.type)), ['pending', 'closed']);
});

test('a notice\'s payload: the stream name (with its colons) and the id after the last colon', () => {
  assert.deepEqual(parseEventNotice('job:abc-1:42'), { kind: 'appended', stream: 'job:abc-1', id: 42 });
  for (const bad of [undefined, '', 'job:abc', ':5', 'job:abc:x', 'job:abc:-1', 'job:abc:0']) assert.equal(parseEventNotice(bad), undefined, String(bad));
});
