// The EventLog contract against every backend, plus what only the SQLite file promises.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteEventLog } from '../../src/store/events/sqlite-event-log.js';
import { eventLogContract } from '../support/event-log-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-events-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;
const freshPath = () => join(dir, `events-${(fileCounter += 1)}.db`);

eventLogContract('sqlite file', (retention) => new SqliteEventLog(freshPath(), retention));
eventLogContract('sqlite in memory', (retention) => new SqliteEventLog(':memory:', retention));

describe('SqliteEventLog', () => {
  it('keeps events, losses and the id sequence across a reopen (a restart of the service)', async () => {
    const path = freshPath();
    const retention = { maxPerStream: 2, maxAgeMs: 3_600_000, maxBytesPerStream: 64 * 1024 * 1024 };
    const first = new SqliteEventLog(path, retention);
    const appended = [];
    for (let i = 0; i < 4; i += 1) appended.push(await first.append('agent:a', 'output', { n: i }, 1_000 + i));
    await first.prune(2_000);
    await first.close();

    const reopened = new SqliteEventLog(path, retention);
    try {
      const kept = await reopened.after('agent:a', 0);
      assert.deepEqual(kept.events, appended.slice(2));
      assert.equal(kept.lostThrough, appended[1]!.id);
      const next = await reopened.append('agent:a', 'output', { n: 4 }, 3_000);
      assert.ok(next.id > appended[3]!.id);
    } finally {
      await reopened.close();
    }
  });
});
