// The SessionRecordStore contract (test/support/session-record-store-contract.ts) on a node's own session
// directories, plus what only the directory layout promises: what the rest of Berth reads there (owner file,
// agent marker, the engine's transcript paths and times) and modes only Berth can read. The PostgreSQL run of
// the same contract is in postgres-stores.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { DirectorySessionRecords } from '../../src/store/sessions/directory-session-records.js';
import { sessionId, sessionRecord, sessionRecordStoreContract } from '../support/session-record-store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-session-records-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

function freshRoot(): string {
  const root = join(dir, `root-${(counter += 1)}`);
  mkdirSync(root, { mode: 0o700 });
  return root;
}

sessionRecordStoreContract('session directories', () => new DirectorySessionRecords(freshRoot(), 64 * 1024 * 1024));

it('writes the layout the session directories have: owner, agent marker, transcripts at the engine\'s paths and times', async () => {
  const root = freshRoot();
  const store = new DirectorySessionRecords(root, 1024);
  const record = sessionRecord(7, { hidden: true });
  await store.put(record);
  const session = join(root, sessionId(7));
  assert.equal(readFileSync(join(session, '.berth-owner'), 'utf8'), 'caller-a');
  assert.equal(statSync(join(session, '.berth-agent')).isFile(), true);
  const transcript = join(session, 'projects', '-workspace', `${sessionId(7)}.jsonl`);
  assert.deepEqual(readFileSync(transcript), record.transcripts[0]!.content);
  assert.equal(Math.trunc(statSync(transcript).mtimeMs), record.transcripts[0]!.writtenAtMs);
  assert.equal(statSync(session).mode & 0o777, 0o700);
  assert.equal(statSync(transcript).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(root), [sessionId(7)], 'no staging directory is left');
  store.close();
});

it('a transcript over the byte limit is not read', async () => {
  const root = freshRoot();
  const store = new DirectorySessionRecords(root, 10);
  await store.put(sessionRecord(1, { transcripts: [{ project: '-w', content: Buffer.alloc(11, 0x61), writtenAtMs: 1 }] }));
  await assert.rejects(store.get(sessionId(1)), /over the 10-byte limit/);
  store.close();
});
