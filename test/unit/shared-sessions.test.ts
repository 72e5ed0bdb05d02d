// Two nodes' session stores on one shared record store (the directory backend stands in for PostgreSQL here;
// both pass the same contract, and test/integration/cluster-sessions.test.ts runs this on PostgreSQL with real
// Berths): a session made by a run on node A is listed, read, resumed, forked and continued on node B; A's
// older copy is replaced before A uses it again; a session deleted on one node is gone on the other; callers
// stay apart; and a resume that did not restore would not see the earlier turn.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, it } from 'node:test';
import type { Caller } from '../../src/core/auth/caller.js';
import { SessionService } from '../../src/core/sessions/session-service.js';
import { projectDirName, SessionStore, type PreparedSession } from '../../src/core/sessions/session-store.js';
import { SharedSessions } from '../../src/core/sessions/shared-sessions.js';
import { DirectorySessionRecords } from '../../src/store/sessions/directory-session-records.js';
import { refused } from './support/refused.js';

const LIMIT = 1024 * 1024;
const ONE: Caller = { owner: 'caller-1' } as Caller;
const TWO: Caller = { owner: 'caller-2' } as Caller;

interface Node {
  readonly store: SessionStore;
  readonly service: SessionService;
}

let root: string;
let shared: DirectorySessionRecords;

async function node(name: string): Promise<Node> {
  const dir = join(root, name);
  mkdirSync(dir, { mode: 0o700 });
  const local = new DirectorySessionRecords(dir, LIMIT);
  const store = new SessionStore(dir, `/host/${name}`, {
    transcriptLimitBytes: LIMIT,
    shared: new SharedSessions({ local, shared, node: name, log: () => undefined }),
    onSaveFailed: (id, error) => assert.fail(`save of ${id} failed: ${String(error)}`),
  });
  await store.init();
  return { store, service: new SessionService({ store, maxPageSize: 100 }) };
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'berth-shared-sessions-'));
  const db = join(root, 'database');
  mkdirSync(db, { mode: 0o700 });
  shared = new DirectorySessionRecords(db, LIMIT);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** One run's turn: what the engine appends to the transcript in the run's configuration directory, then the run's end. */
async function turn(n: Node, run: PreparedSession, text: string, workdir = '/workspace'): Promise<void> {
  const dir = join(n.store.dir, '.runs', basename(run.mountPath), 'projects', projectDirName(workdir));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${run.sessionId}.jsonl`);
  let before = '';
  try {
    before = readFileSync(file, 'utf8');
  } catch {
    // A new session's first turn.
  }
  const id = (k: number) => `00000000-0000-4000-8000-${String(before.split('\n').length * 10 + k).padStart(12, '0')}`;
  writeFileSync(file, before + JSON.stringify({ type: 'user', uuid: id(1), message: { role: 'user', content: text } }) + '\n' +
    JSON.stringify({ type: 'assistant', uuid: id(2), message: { id: `m${id(2)}`, role: 'assistant', content: [{ type: 'text', text: `answer to ${text}` }] } }) + '\n');
  await run.release();
}

const texts = async (n: Node, id: string, caller = ONE) => (await n.service.messages(id, {}, caller)).messages.map((message) => message.content);

it('a session made on node A is listed, read and resumed on node B, and A catches up before it runs it again', async () => {
  const a = await node('a');
  const b = await node('b');
  const first = await a.store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  await first.recordTitle?.('the first prompt');
  await turn(a, first, 'first');
  const id = first.sessionId;

  assert.deepEqual(await b.service.list(ONE), [{ id, title: 'the first prompt' }]);
  assert.deepEqual(await texts(b, id), ['first', 'answer to first']);

  const resumed = await b.store.prepare({ kind: 'resume', sessionId: id }, '/workspace', { owner: ONE.owner });
  // The run on B got the earlier conversation in its configuration directory: what the engine resumes from.
  const carried = readFileSync(join(b.store.dir, '.runs', basename(resumed.mountPath), 'projects', '-workspace', `${id}.jsonl`), 'utf8');
  assert.match(carried, /"first"/);
  await turn(b, resumed, 'second');
  assert.deepEqual(await texts(a, id), ['first', 'answer to first', 'second', 'answer to second'], 'A replaced its older copy');

  const again = await a.store.prepare({ kind: 'continue' }, '/workspace', { owner: ONE.owner });
  assert.equal(again.sessionId, id, 'continue on A picks the session B ran last');
  await turn(a, again, 'third');
  assert.equal((await texts(b, id)).length, 6);
});

it('another caller finds nothing of the session on any node', async () => {
  const a = await node('a');
  const b = await node('b');
  const run = await a.store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  await turn(a, run, 'secret');
  assert.deepEqual(await b.service.list(TWO), []);
  await assert.rejects(texts(b, run.sessionId, TWO), refused(/not found/, 404));
  await assert.rejects(b.store.prepare({ kind: 'resume', sessionId: run.sessionId }, '/workspace', { owner: TWO.owner }), refused(/not found/, 404));
  await assert.rejects(b.store.prepare({ kind: 'fork', fromSessionId: run.sessionId }, '/workspace', { owner: TWO.owner }), refused(/not found/, 404));
  const theirs = await b.store.prepare({ kind: 'continue' }, '/workspace', { owner: TWO.owner });
  assert.notEqual(theirs.sessionId, run.sessionId, "continue never picks another caller's session");
  await theirs.release();
});

it('a fork on B of a session made on A; a delete on B removes it from A too', async () => {
  const a = await node('a');
  const b = await node('b');
  const run = await a.store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  await turn(a, run, 'root');
  const fork = await b.store.prepare({ kind: 'fork', fromSessionId: run.sessionId }, '/workspace', { owner: ONE.owner });
  assert.notEqual(fork.sessionId, run.sessionId);
  await b.service.delete(run.sessionId, ONE);
  await assert.rejects(texts(a, run.sessionId), refused(/not found/, 404), "A's copy of a session deleted on B is dropped");
  assert.deepEqual(await a.service.list(ONE), []);
  await fork.release();
});

it('a new session whose first run has not ended is not dropped by a read on its own node', async () => {
  const a = await node('a');
  const run = await a.store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  assert.equal(await a.store.isVisible(run.sessionId, ONE.owner), true);
  await turn(a, run, 'late');
  assert.equal(await a.store.isVisible(run.sessionId, ONE.owner), true);
});

it("an agent's session is saved at each turn's end while its engine goes on, and readable on another node", async () => {
  const a = await node('a');
  const b = await node('b');
  const agent = await a.store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  assert.ok(agent.saveProgress, 'a persistent session on a shared database can be saved mid-run');
  const dir = join(a.store.dir, '.runs', basename(agent.mountPath), 'projects', '-workspace');
  mkdirSync(dir, { recursive: true });
  const line = (k: number, role: 'user' | 'assistant', text: string) =>
    JSON.stringify({ type: role, uuid: `00000000-0000-4000-8000-00000000000${k}`, message: { id: `m${k}`, role, content: role === 'user' ? text : [{ type: 'text', text }] } }) + '\n';
  writeFileSync(join(dir, `${agent.sessionId}.jsonl`), line(1, 'user', 'turn one') + line(2, 'assistant', 'one'));
  // Asked twice at once: saved once after the other, never side by side.
  await Promise.all([agent.saveProgress(), agent.saveProgress()]);
  assert.deepEqual(await texts(b, agent.sessionId), ['turn one', 'one']);
  writeFileSync(join(dir, `${agent.sessionId}.jsonl`), line(1, 'user', 'turn one') + line(2, 'assistant', 'one') + line(3, 'user', 'turn two') + line(4, 'assistant', 'two'));
  await agent.saveProgress();
  assert.equal((await texts(b, agent.sessionId)).length, 4);
  await agent.release();
  await agent.saveProgress();
  assert.equal((await texts(b, agent.sessionId)).length, 4, 'a save asked after the release does nothing');
});

it('without a shared database a run has no progress saves', async () => {
  const dir = join(root, 'alone');
  mkdirSync(dir);
  const store = new SessionStore(dir, '/host/alone', { transcriptLimitBytes: LIMIT });
  await store.init();
  const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  assert.equal(run.saveProgress, undefined);
  await run.release();
});

it('a node that starts on a shared database saves the sessions it made before (never saved), once', async () => {
  const dir = join(root, 'a');
  mkdirSync(dir, { mode: 0o700 });
  const before = new SessionStore(dir, '/host/a', { transcriptLimitBytes: LIMIT });
  await before.init();
  const run = await before.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  await turn({ store: before, service: new SessionService({ store: before, maxPageSize: 100 }) }, run, 'from before the database');
  const never = await before.prepare({ kind: 'new' }, '/workspace', { owner: ONE.owner });
  await never.release();

  const local = new DirectorySessionRecords(dir, LIMIT);
  const after = new SessionStore(dir, '/host/a', { transcriptLimitBytes: LIMIT, shared: new SharedSessions({ local, shared, node: 'a', log: () => undefined }) });
  await after.init();
  assert.equal(await shared.version(run.sessionId), 1);
  assert.deepEqual((await shared.list(ONE.owner)).map((listed) => listed.id), [run.sessionId]);
  const again = new SessionStore(dir, '/host/a', { transcriptLimitBytes: LIMIT, shared: new SharedSessions({ local, shared, node: 'a', log: () => undefined }) });
  await again.init();
  assert.equal(await shared.version(run.sessionId), 1, 'a second start saves nothing again');
});
