// The EventLog contract (src/store/events/event-log.ts) as one suite any backend runs: pass a name and a
// function that opens a fresh, empty log with the given retention.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventLog, EventRetention } from '../../src/store/events/event-log.js';

const ROOMY: EventRetention = { maxPerStream: 1_000, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 };
const T0 = Date.parse('2030-01-01T00:00:00.000Z');

/** Slack a backend may keep beyond maxPerStream between two prune() calls (SqliteEventLog: one prune per 64 appends). */
export const APPEND_PRUNE_SLACK = 64;

export function eventLogContract(name: string, open: (retention: EventRetention) => EventLog | Promise<EventLog>): void {
  describe(`EventLog contract: ${name}`, () => {
    async function withLog(retention: EventRetention, body: (log: EventLog) => Promise<void>): Promise<void> {
      const log = await open(retention);
      try {
        await body(log);
      } finally {
        await log.close();
      }
    }

    it('ids grow with every append, across streams', () =>
      withLog(ROOMY, async (log) => {
        const ids: number[] = [];
        for (let i = 0; i < 20; i += 1) ids.push((await log.append(i % 2 === 0 ? 'agent:a' : 'job:b', 'output', { n: i }, T0 + i)).id);
        for (let i = 1; i < ids.length; i += 1) assert.ok(ids[i]! > ids[i - 1]!, `id ${ids[i]} follows ${ids[i - 1]}`);
      }));

    it('after() answers one stream\'s events above the id, oldest first, as they were appended', () =>
      withLog(ROOMY, async (log) => {
        const a1 = await log.append('agent:a', 'turn_start', { type: 'turn_start', turn_id: 't1' }, T0);
        await log.append('agent:other', 'output', { content: 'not mine' }, T0 + 1);
        const a2 = await log.append('agent:a', 'output', { type: 'output', content: 'line "quoted"\nnext', nested: { n: 1 } }, T0 + 2);
        const a3 = await log.append('agent:a', 'turn_end', { type: 'turn_end' }, T0 + 3);
        const all = await log.after('agent:a', 0);
        assert.deepEqual(all.events, [a1, a2, a3]);
        assert.equal(all.lostThrough, undefined);
        assert.deepEqual(all.events[1], { id: a2.id, stream: 'agent:a', type: 'output', data: { type: 'output', content: 'line "quoted"\nnext', nested: { n: 1 } }, atMs: T0 + 2 });
        assert.deepEqual((await log.after('agent:a', a1.id)).events.map((e) => e.id), [a2.id, a3.id]);
        assert.deepEqual((await log.after('agent:a', a3.id)).events, []);
        assert.deepEqual((await log.after('agent:a', 0, 2)).events.map((e) => e.id), [a1.id, a2.id]);
        assert.deepEqual((await log.after('agent:unknown', 0)).events, []);
      }));

    it('prune() keeps each stream\'s newest maxPerStream events and says which ids were lost', () =>
      withLog({ maxPerStream: 3, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }, async (log) => {
        const ids: number[] = [];
        for (let i = 0; i < 10; i += 1) ids.push((await log.append('agent:a', 'output', { n: i }, T0 + i)).id);
        const other = await log.append('agent:b', 'output', { n: 0 }, T0);
        await log.prune(T0 + 10);
        const kept = await log.after('agent:a', 0);
        assert.deepEqual(kept.events.map((e) => e.data['n']), [7, 8, 9]);
        assert.equal(kept.lostThrough, ids[6], 'the newest pruned id');
        assert.equal((await log.after('agent:a', ids[5]!)).lostThrough, ids[6]);
        // A reader that had seen the last pruned event lost nothing.
        const caughtUp = await log.after('agent:a', ids[6]!);
        assert.equal(caughtUp.lostThrough, undefined);
        assert.deepEqual(caughtUp.events.map((e) => e.id), ids.slice(7));
        assert.deepEqual((await log.after('agent:b', 0)).events, [other]);
      }));

    it('appends alone keep a stream near its count bound', () =>
      withLog({ maxPerStream: 5, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }, async (log) => {
        for (let i = 0; i < 300; i += 1) await log.append('agent:a', 'output', { n: i }, T0 + i);
        const kept = await log.after('agent:a', 0);
        assert.ok(kept.events.length <= 5 + APPEND_PRUNE_SLACK, `${kept.events.length} events kept`);
        assert.equal(kept.events.at(-1)!.data['n'], 299, 'the newest is kept');
        assert.ok(kept.lostThrough !== undefined && kept.lostThrough < kept.events[0]!.id);
      }));

    it('each stream keeps at most maxBytesPerStream of event data, the newest event whatever its size', () =>
      withLog({ maxPerStream: 1_000, maxAgeMs: 3_600_000, maxBytesPerStream: 10_000 }, async (log) => {
        const kilobyte = 'x'.repeat(1_000);
        for (let i = 0; i < 40; i += 1) await log.append('agent:a', 'output', { n: i, content: kilobyte }, T0 + i);
        const small = await log.append('agent:b', 'output', { n: 0 }, T0);
        await log.prune(T0 + 40);
        const kept = await log.after('agent:a', 0);
        const bytes = kept.events.reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e.data)), 0);
        assert.ok(bytes <= 10_000, `${bytes} bytes kept`);
        assert.ok(kept.events.length >= 8, `the newest that fit are kept (${kept.events.length})`);
        assert.equal(kept.events.at(-1)!.data['n'], 39);
        assert.ok(kept.lostThrough !== undefined);
        assert.deepEqual((await log.after('agent:b', 0)).events, [small]);
        // One event larger than the bound is kept, alone.
        const huge = await log.append('agent:a', 'output', { content: 'y'.repeat(20_000) }, T0 + 41);
        await log.prune(T0 + 42);
        assert.deepEqual((await log.after('agent:a', 0)).events.map((e) => e.id), [huge.id]);
      }));

    it('prune() removes events older than maxAgeMs, in every stream', () =>
      withLog({ maxPerStream: 1_000, maxAgeMs: 60_000, maxBytesPerStream: 64 * 1024 * 1024 }, async (log) => {
        const old = await log.append('job:j', 'status', { status: 'pending' }, T0);
        const oldOther = await log.append('agent:a', 'output', {}, T0 + 1);
        const recent = await log.append('job:j', 'status', { status: 'running' }, T0 + 50_000);
        const removed = await log.prune(T0 + 60_000 + 10);
        assert.equal(removed, 2);
        const kept = await log.after('job:j', 0);
        assert.deepEqual(kept.events, [recent]);
        assert.equal(kept.lostThrough, old.id);
        assert.deepEqual((await log.after('agent:a', 0)).events, []);
        assert.equal((await log.after('agent:a', 0)).lostThrough, oldOther.id);
      }));

    it('removeStream() forgets the stream\'s events and its losses, and its ids are never handed out again', () =>
      withLog({ maxPerStream: 2, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 }, async (log) => {
        for (let i = 0; i < 5; i += 1) await log.append('agent:a', 'output', { n: i }, T0 + i);
        const last = await log.append('agent:a', 'exited', {}, T0 + 5);
        await log.prune(T0 + 6);
        await log.removeStream('agent:a');
        assert.deepEqual(await log.after('agent:a', 0), { events: [], lostThrough: undefined });
        const next = await log.append('agent:c', 'output', {}, T0 + 7);
        assert.ok(next.id > last.id, 'a removed last id is not reused');
      }));

    it('an append is readable as soon as it resolves, also while another stream appends', () =>
      withLog(ROOMY, async (log) => {
        const writes = Array.from({ length: 50 }, (_, i) => log.append(i % 5 === 0 ? 'agent:a' : 'agent:noise', 'output', { n: i }, T0 + i));
        const first = await writes[0]!;
        assert.ok((await log.after('agent:a', 0)).events.some((e) => e.id === first.id));
        await Promise.all(writes);
        assert.equal((await log.after('agent:a', 0)).events.length, 10);
      }));
  });
}
