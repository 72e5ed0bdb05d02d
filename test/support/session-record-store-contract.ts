// The SessionRecordStore contract (src/store/sessions/session-record-store.ts) as one suite any backend runs:
// pass a name and a function that opens a fresh, empty store. Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { SessionRecord, SessionRecordStore } from '../../src/store/sessions/session-record-store.js';

export const sessionId = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

export function sessionRecord(n: number, extra: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: sessionId(n),
    owner: 'caller-a',
    hidden: false,
    title: `session ${n}`,
    node: 'node-a',
    version: 1,
    transcripts: [{ project: '-workspace', content: Buffer.from(`{"type":"user","n":${n}}\n`), writtenAtMs: T0 + n * 1000 }],
    ...extra,
  };
}

export function sessionRecordStoreContract(name: string, open: () => SessionRecordStore | Promise<SessionRecordStore>): void {
  const id = sessionId;
  const record = sessionRecord;
  describe(`SessionRecordStore contract: ${name}`, () => {
    let store: SessionRecordStore;
    beforeEach(async () => {
      store = await open();
    });
    afterEach(() => store.close());

    it('keeps a record whole, transcripts byte for byte, and finds it by id', async () => {
      const binary = Buffer.from([0x7b, 0x00, 0xff, 0xfe, 0x0a, 0x5c, 0x75, 0x30, 0x30, 0x30, 0x30]);
      const kept = record(1, {
        hidden: true,
        title: 'Fix the «calc» bug',
        transcripts: [
          { project: '-workspace', content: binary, writtenAtMs: T0 + 5 },
          { project: '-home-user-project-2', content: Buffer.from('{"a":1}\n'), writtenAtMs: T0 + 9 },
        ],
      });
      assert.equal(await store.put(kept), true);
      const found = await store.get(id(1));
      assert.ok(found);
      const byProject = (r: SessionRecord) => [...r.transcripts].sort((a, b) => a.project.localeCompare(b.project));
      assert.deepEqual({ ...found, transcripts: byProject(found) }, { ...kept, transcripts: byProject(kept) });
      assert.equal(await store.get(id(2)), undefined);
      assert.equal(await store.version(id(1)), 1);
      assert.equal(await store.version(id(2)), 0);
    });

    it('a later version replaces the whole record; the same or an older one is refused', async () => {
      assert.equal(await store.put(record(1, { version: 2 })), true);
      assert.equal(await store.put(record(1, { version: 2, title: 'a second save of version 2' })), false);
      assert.equal(await store.put(record(1, { version: 1, title: 'older' })), false);
      assert.equal((await store.get(id(1)))?.title, 'session 1');
      const next = record(1, {
        version: 3,
        node: 'node-b',
        owner: 'caller-a',
        title: 'renamed',
        transcripts: [{ project: '-other', content: Buffer.from('x\n'), writtenAtMs: T0 + 100 }],
      });
      assert.equal(await store.put(next), true);
      assert.deepEqual(await store.get(id(1)), next, 'the transcript of the earlier project is gone with the earlier version');
      assert.equal(await store.version(id(1)), 3);
    });

    it('of saves of one version racing, exactly one is kept', async () => {
      await store.put(record(1));
      const results = await Promise.all([2, 2, 2, 2].map((version, n) => store.put(record(1, { version, node: `node-${n}` }))));
      assert.equal(results.filter(Boolean).length, 1);
      assert.equal(await store.version(id(1)), 2);
    });

    it("lists an owner's visible sessions, most recently active first, with their titles", async () => {
      await store.put(record(1));
      await store.put(record(2, { transcripts: [{ project: '-workspace', content: Buffer.from('a\n'), writtenAtMs: T0 + 50_000 }] }));
      await store.put(record(3, { owner: 'caller-b' }));
      await store.put(record(4, { hidden: true }));
      await store.put(record(5, { transcripts: [] }));
      assert.deepEqual(await store.list('caller-a'), [
        { id: id(2), title: 'session 2', lastActivityMs: T0 + 50_000 },
        { id: id(1), title: 'session 1', lastActivityMs: T0 + 1000 },
        { id: id(5), title: 'session 5', lastActivityMs: 0 },
      ]);
      assert.deepEqual(await store.list('caller-b'), [{ id: id(3), title: 'session 3', lastActivityMs: T0 + 3000 }]);
      assert.deepEqual(await store.list('nobody'), []);
    });

    it("continue's choice: the owner's visible session whose transcript for the project was written last", async () => {
      await store.put(record(1, { transcripts: [{ project: '-workspace', content: Buffer.from('a\n'), writtenAtMs: T0 + 10 }] }));
      await store.put(record(2, { transcripts: [{ project: '-workspace', content: Buffer.from('a\n'), writtenAtMs: T0 + 20 }, { project: '-elsewhere', content: Buffer.from('b\n'), writtenAtMs: T0 + 1 }] }));
      await store.put(record(3, { transcripts: [{ project: '-elsewhere', content: Buffer.from('b\n'), writtenAtMs: T0 + 99 }] }));
      await store.put(record(4, { hidden: true, transcripts: [{ project: '-workspace', content: Buffer.from('a\n'), writtenAtMs: T0 + 999 }] }));
      await store.put(record(5, { owner: 'caller-b', transcripts: [{ project: '-workspace', content: Buffer.from('a\n'), writtenAtMs: T0 + 999 }] }));
      assert.equal(await store.latestForProject('caller-a', '-workspace'), id(2));
      assert.equal(await store.latestForProject('caller-a', '-elsewhere'), id(3));
      assert.equal(await store.latestForProject('caller-a', '-nothing'), undefined);
      assert.equal(await store.latestForProject('caller-b', '-workspace'), id(5));
    });

    it('removes a record with its transcripts; removing an unknown one does nothing', async () => {
      await store.put(record(1));
      await store.remove(id(1));
      await store.remove(id(2));
      assert.equal(await store.get(id(1)), undefined);
      assert.equal(await store.version(id(1)), 0);
      assert.deepEqual(await store.list('caller-a'), []);
      assert.equal(await store.put(record(1)), true, 'a removed id can be saved again from version 1');
    });

    it('refuses a transcript project that is not a project directory name, keeping nothing of it', async () => {
      for (const project of ['../etc', 'a/b', '', '.', 'x y']) {
        await assert.rejects(store.put(record(1, { transcripts: [{ project, content: Buffer.from('a'), writtenAtMs: T0 }] })));
      }
      assert.equal(await store.get(id(1)), undefined);
    });
  });
}
