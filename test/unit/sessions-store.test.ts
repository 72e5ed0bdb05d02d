// The session store and service on a temporary directory, with transcripts written the way the engine
// writes them: ids checked before any path is built, busy locks, listing, paging, deletion.
import { SOLE_CALLER } from '../../src/core/auth/caller.js';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readFileSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { HIDDEN_MARKER, projectDirName, SessionStore } from '../../src/core/sessions/session-store.js';
import { SessionService } from '../../src/core/sessions/session-service.js';
import { refused } from './support/refused.js';

const SAMPLE = join(import.meta.dirname, '../fixtures/engine-session-tooluse.jsonl');
const A = 'aaaaaaaa-0000-4000-8000-000000000001';
const B = 'bbbbbbbb-0000-4000-8000-000000000002';
const C = 'cccccccc-0000-4000-8000-000000000003';

let root: string;
let store: SessionStore;
let service: SessionService;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'berth-sessions-'));
  store = new SessionStore(join(root, 'sessions'), '/host/sessions', { transcriptLimitBytes: 1024 * 1024 });
  await store.init();
  service = new SessionService({ store, maxPageSize: 10 });
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A session directory with a transcript, as the engine leaves it. */
function writeSession(id: string, lines: readonly object[], options: { workdir?: string; mtime?: number } = {}): string {
  const project = join(store.dir, id, 'projects', projectDirName(options.workdir ?? '/workspace'));
  mkdirSync(project, { recursive: true });
  const file = join(project, `${id}.jsonl`);
  writeFileSync(file, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
  if (options.mtime !== undefined) utimesSync(file, options.mtime, options.mtime);
  return file;
}

/** Berth's path of the configuration directory a run mounts (its mountPath is the host's view). */
function runDir(run: { mountPath: string }): string {
  assert.match(run.mountPath, /^\/host\/sessions\/\.runs\/([0-9a-f]{24}|run-[a-z-]+)$/);
  return join(store.dir, '.runs', basename(run.mountPath));
}

/** What the engine writes into the run's configuration directory. */
function writeRunTranscript(run: { mountPath: string }, id: string, lines: readonly object[], workdir = '/workspace'): void {
  const project = join(runDir(run), 'projects', projectDirName(workdir));
  mkdirSync(project, { recursive: true });
  writeFileSync(join(project, `${id}.jsonl`), lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
}

function conversation(turns: number): object[] {
  const lines: object[] = [];
  for (let turn = 0; turn < turns; turn++) {
    lines.push({ type: 'user', uuid: `00000000-0000-4000-8000-${String(turn * 2).padStart(12, '0')}`, message: { role: 'user', content: `prompt ${turn}` } });
    lines.push({
      type: 'assistant',
      uuid: `00000000-0000-4000-8000-${String(turn * 2 + 1).padStart(12, '0')}`,
      message: { id: `msg_${turn}`, role: 'assistant', content: [{ type: 'text', text: `answer ${turn}` }] },
    });
  }
  return lines;
}

function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true }).map(String).sort();
}

describe('session ids', () => {
  const bad = ['../../etc', '..', 'aaaaaaaa-0000-4000-8000-00000000000/', `${A}/../${B}`, '', 'not-a-uuid', `${A}\0`];
  for (const id of bad) {
    it(`refuses ${JSON.stringify(id)} with 400 before touching any file`, async () => {
      writeSession(A, conversation(1));
      const before = tree(root);
      // On the paths, an id that is not a UUID names no session: 404, like any unknown id.
      await assert.rejects(service.messages(id, {}, SOLE_CALLER), refused(/^session .* not found$/, 404));
      await assert.rejects(service.message(id, 'x', SOLE_CALLER), refused(/^session .* not found$/, 404));
      await assert.rejects(service.delete(id, SOLE_CALLER), refused(/^session .* not found$/, 404));
      await assert.rejects(store.prepare({ kind: 'resume', sessionId: id }, '/workspace', { owner: '' }), refused(/^session id ".*" is not a UUID$/s));
      await assert.rejects(store.prepare({ kind: 'fork', fromSessionId: id }, '/workspace', { owner: '' }), refused(/^session id ".*" is not a UUID$/s));
      assert.deepEqual(tree(root), before);
    });
  }

  it('accepts upper-case UUIDs as the same session', async () => {
    writeSession(A, conversation(1));
    assert.equal((await service.messages(A.toUpperCase(), {}, SOLE_CALLER)).total, 2);
  });
});

describe('listing', () => {
  it('lists sessions most recently active first, with titles', async () => {
    writeSession(A, [{ type: 'custom-title', customTitle: 'older' }, ...conversation(1)], { mtime: 1_000 });
    writeSession(B, conversation(1), { mtime: 3_000 });
    writeSession(C, [...conversation(1), { type: 'custom-title', customTitle: 'middle' }], { mtime: 2_000 });
    assert.deepEqual(await service.list(SOLE_CALLER), [
      { id: B, title: '' },
      { id: C, title: 'middle' },
      { id: A, title: 'older' },
    ]);
  });

  it('reads a changed title again', async () => {
    const file = writeSession(A, [{ type: 'custom-title', customTitle: 'one' }], { mtime: 1_000 });
    assert.equal((await service.list(SOLE_CALLER))[0]?.title, 'one');
    writeFileSync(file, JSON.stringify({ type: 'custom-title', customTitle: 'two' }) + '\n');
    assert.equal((await service.list(SOLE_CALLER))[0]?.title, 'two');
  });

  it('leaves out persistent agents\' sessions, ephemeral runs and stray entries', async () => {
    writeSession(A, conversation(1));
    writeSession(B, conversation(1));
    await store.hide(B);
    mkdirSync(join(store.dir, 'not-a-session'));
    writeFileSync(join(store.dir, C), 'a file, not a directory');
    const ephemeral = await store.prepare({ kind: 'ephemeral' }, '/workspace', { owner: '' });
    assert.deepEqual((await service.list(SOLE_CALLER)).map((s) => s.id), [A]);
    await ephemeral.release();
  });

  it('serves no transcript of a persistent agent\'s session', async () => {
    writeSession(A, conversation(1));
    await store.hide(A);
    await assert.rejects(service.messages(A, {}, SOLE_CALLER), refused(/^session .* not found$/, 404));
  });
});

describe('messages', () => {
  it('pages through every message exactly once', async () => {
    writeSession(A, conversation(12));
    const seen: string[] = [];
    for (let offset = 0; ; offset += 5) {
      const page = await service.messages(A, { limit: 5, offset }, SOLE_CALLER);
      assert.equal(page.total, 24);
      if (page.messages.length === 0) break;
      seen.push(...page.messages.map((m) => m.content));
    }
    assert.equal(seen.length, 24);
    assert.deepEqual(seen.slice(0, 3), ['prompt 0', 'answer 0', 'prompt 1']);
    assert.equal(new Set(seen).size, 24);
  });

  it('defaults to 50 from the start, clamped to the maximum page size', async () => {
    writeSession(A, conversation(12));
    const page = await service.messages(A, {}, SOLE_CALLER);
    assert.equal(page.messages.length, 10);
    assert.equal(page.limit, 10);
    assert.equal(page.offset, 0);
    assert.equal((await service.messages(A, { limit: 1000 }, SOLE_CALLER)).messages.length, 10);
  });

  it('answers an empty page past the end, with the total', async () => {
    writeSession(A, conversation(2));
    assert.deepEqual(await service.messages(A, { offset: 10 }, SOLE_CALLER), { messages: [], total: 4, limit: 10, offset: 10, has_more: false });
  });

  it('refuses a negative or fractional limit or offset with 400', async () => {
    writeSession(A, conversation(1));
    await assert.rejects(service.messages(A, { limit: -1 }, SOLE_CALLER), refused('limit must be a whole number ≥ 0'));
    await assert.rejects(service.messages(A, { offset: -1 }, SOLE_CALLER), refused('offset must be a whole number ≥ 0'));
    await assert.rejects(service.messages(A, { limit: 1.5 }, SOLE_CALLER), refused('limit must be a whole number ≥ 0'));
  });

  it('reads the real engine transcript', async () => {
    mkdirSync(join(store.dir, A, 'projects', '-workspace'), { recursive: true });
    copyFileSync(SAMPLE, join(store.dir, A, 'projects', '-workspace', `${A}.jsonl`));
    const page = await service.messages(A, {}, SOLE_CALLER);
    assert.equal(page.total, 4);
    assert.equal(page.messages[2]?.content, '[tool result] hello-from-bash');
  });

  it('finds one message by id', async () => {
    writeSession(A, conversation(2));
    const all = (await service.messages(A, {}, SOLE_CALLER)).messages;
    assert.deepEqual(await service.message(A, all[3]!.id, SOLE_CALLER), all[3]);
  });

  it('answers 404 for an unknown message or session', async () => {
    writeSession(A, conversation(1));
    await assert.rejects(service.message(A, 'ffffffff-0000-4000-8000-000000000000', SOLE_CALLER), refused(/^message .* not found$/, 404));
    await assert.rejects(service.messages(B, {}, SOLE_CALLER), refused(/^session .* not found$/, 404));
    await assert.rejects(service.message(B, 'x', SOLE_CALLER), refused(/^session .* not found$/, 404));
  });

  it('of a session whose run has not written a transcript yet: none', async () => {
    mkdirSync(join(store.dir, A));
    assert.deepEqual(await service.messages(A, {}, SOLE_CALLER), { messages: [], total: 0, limit: 10, offset: 0, has_more: false });
  });
});

describe('deleting', () => {
  it('removes the directory and answers with the id', async () => {
    writeSession(A, conversation(1));
    assert.deepEqual(await service.delete(A, SOLE_CALLER), { success: true, session_id: A });
    assert.equal(existsSync(join(store.dir, A)), false);
    await assert.rejects(service.messages(A, {}, SOLE_CALLER), refused(/^session .* not found$/, 404));
  });

  it('answers 404 for an unknown session', async () => {
    await assert.rejects(service.delete(A, SOLE_CALLER), refused(/^session .* not found$/, 404));
  });

  it('is refused with 409 while a run holds the session', async () => {
    writeSession(A, conversation(1));
    const run = await store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' });
    await assert.rejects(service.delete(A, SOLE_CALLER), refused(/^session .* is in use by another run; retry when it has finished$/, 409));
    await run.release();
    await service.delete(A, SOLE_CALLER);
  });

  it('calls the teardown before removing', async () => {
    writeSession(A, conversation(1));
    const torn: string[] = [];
    const withTeardown = new SessionService({ store, maxPageSize: 10, teardown: async (id) => void torn.push(id) });
    await withTeardown.delete(A, SOLE_CALLER);
    assert.deepEqual(torn, [A]);
  });
});

describe('runs taking sessions', () => {
  it('refuses a second run on a busy session with 409 until the first releases it', async () => {
    writeSession(A, conversation(1));
    const first = await store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' });
    await assert.rejects(store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' }), refused(/^session .* is in use by another run; retry when it has finished$/, 409));
    await first.release();
    await (await store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' })).release();
  });

  it('answers 404 for resuming or forking a session that does not exist', async () => {
    await assert.rejects(store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' }), refused(/^session .* not found$/, 404));
    await assert.rejects(store.prepare({ kind: 'fork', fromSessionId: A }, '/workspace', { owner: '' }), refused(/^session .* not found$/, 404));
    assert.equal(store.isBusy(A), false);
  });

  it('mounts a fresh directory of the run\'s own, never the session\'s directory', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    assert.notEqual(run.mountPath, `/host/sessions/${A}`);
    assert.deepEqual(readdirSync(runDir(run)), []);
    assert.deepEqual(run.engineSession, { kind: 'new', sessionId: A });
    await run.release();
    assert.equal(existsSync(runDir(run)), false, 'the run directory goes with the run');
  });

  it('carries only the transcript between runs: nothing a run plants there reaches the next one', async () => {
    const first = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    writeRunTranscript(first, A, conversation(1));
    writeFileSync(join(runDir(first), 'settings.json'), JSON.stringify({ hooks: { SessionStart: [{ hooks: [{ type: 'command', command: 'touch /pwned' }] }] }, env: { PLANTED: '1' } }));
    writeFileSync(join(runDir(first), '.claude.json'), JSON.stringify({ mcpServers: { evil: { command: '/bin/sh' } } }));
    mkdirSync(join(runDir(first), 'projects', '-workspace', 'hooks'));
    await first.release();
    const second = await store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' });
    assert.deepEqual(readdirSync(runDir(second), { recursive: true }).map(String).sort(), ['projects', 'projects/-workspace', `projects/-workspace/${A}.jsonl`]);
    await second.release();
    assert.equal((await service.messages(A, {}, SOLE_CALLER)).total, 2);
  });

  it('does not carry back a transcript left as a link, a FIFO or over the size limit', async () => {
    writeSession(A, conversation(1));
    const secret = join(root, 'host-secret.jsonl');
    writeFileSync(secret, JSON.stringify({ type: 'user', message: { role: 'user', content: 'host secret' } }) + '\n');
    for (const plant of [
      (file: string) => symlinkSync(secret, file),
      (file: string) => execFileSync('mkfifo', [file]),
      (file: string) => writeFileSync(file, 'x'.repeat(2 * 1024 * 1024)),
    ]) {
      const run = await store.prepare({ kind: 'resume', sessionId: A }, '/workspace', { owner: '' });
      const file = join(runDir(run), 'projects', '-workspace', `${A}.jsonl`);
      rmSync(file);
      plant(file);
      await run.release();
      assert.deepEqual((await service.messages(A, {}, SOLE_CALLER)).messages.map((m) => m.content), ['prompt 0', 'answer 0'], 'the session keeps its own transcript');
    }
  });

  it('removes a new session again when its run wrote no transcript', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    assert.ok(existsSync(join(store.dir, A)));
    await run.release();
    assert.equal(existsSync(join(store.dir, A)), false);
  });

  it('keeps a new session whose run wrote a transcript', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    writeRunTranscript(run, A, conversation(1));
    await run.release();
    assert.equal((await service.messages(A, {}, SOLE_CALLER)).total, 2);
  });

  it('carries back a pooled engine\'s transcript without its warm-up, and keeps nothing of an engine that took no turn', async () => {
    // The head of a warmed engine's transcript, as the engine wrote it (engine/warm-up.ts).
    const warmed = readFileSync(join(import.meta.dirname, '../fixtures/warmed-engine-transcript-head.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as object);
    const used = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    writeRunTranscript(used, A, warmed);
    await used.release();
    const kept = readFileSync(join(store.dir, A, 'projects', '-workspace', `${A}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type: string; parentUuid?: unknown });
    assert.deepEqual(kept.map((record) => record.type), ['queue-operation', 'queue-operation', 'user', 'attachment']);
    assert.equal(kept[2]!.parentUuid, null);
    assert.deepEqual((await service.messages(A, {}, SOLE_CALLER)).messages.map((m) => m.content), ['say: hello']);

    const unused = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: B });
    writeRunTranscript(unused, B, warmed.slice(0, 3));
    await unused.release();
    assert.equal(existsSync(join(store.dir, B)), false, 'a session of nothing but the warm-up is removed');
  });

  it('titles a new session in its transcript when the run ends, as the engine records a title', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    await run.recordTitle!('Fix the login bug');
    writeRunTranscript(run, A, conversation(1));
    await run.release();
    const lines = readFileSync(join(store.dir, A, 'projects', '-workspace', `${A}.jsonl`), 'utf8').trimEnd().split('\n');
    assert.deepEqual(JSON.parse(lines.at(-1)!), { type: 'custom-title', customTitle: 'Fix the login bug', sessionId: A });
    assert.equal(lines.length, 3);
    assert.deepEqual((await service.list(SOLE_CALLER)).map((session) => session.title), ['Fix the login bug']);
  });

  it('keeps a title the engine wrote itself', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A });
    await run.recordTitle!('from the prompt');
    writeRunTranscript(run, A, [{ type: 'custom-title', customTitle: 'renamed by the engine', sessionId: A }, ...conversation(1)]);
    await run.release();
    assert.deepEqual((await service.list(SOLE_CALLER)).map((session) => session.title), ['renamed by the engine']);
  });

  it('titles only sessions a run creates new: a resumed, forked or ephemeral run has no title to record', async () => {
    writeSession(A, conversation(1));
    for (const [intent, presetId] of [[{ kind: 'resume', sessionId: A }, undefined], [{ kind: 'fork', fromSessionId: A }, B], [{ kind: 'ephemeral' }, C]] as const) {
      const run = await store.prepare(intent, '/workspace', { owner: '', ...(presetId ? { presetId } : {}) });
      assert.equal(run.recordTitle, undefined, intent.kind);
      await run.release();
    }
  });

  it('forks into a copy, leaving the original untouched and dropping its transcript from the copy', async () => {
    writeSession(A, [{ type: 'custom-title', customTitle: 't' }, ...conversation(1)]);
    const before = tree(join(store.dir, A));
    const run = await store.prepare({ kind: 'fork', fromSessionId: A }, '/workspace', { owner: '', presetId: B });
    assert.deepEqual(run.engineSession, { kind: 'fork', fromSessionId: A, sessionId: B });
    assert.ok(existsSync(join(runDir(run), 'projects', '-workspace', `${A}.jsonl`)), 'the engine needs the original to fork from');
    writeRunTranscript(run, B, conversation(2)); // what the engine writes for the fork
    await run.release();
    assert.deepEqual(tree(join(store.dir, A)), before);
    assert.equal(existsSync(join(store.dir, B, 'projects', '-workspace', `${A}.jsonl`)), false);
    assert.equal((await service.messages(B, {}, SOLE_CALLER)).total, 4);
  });

  it('continues the session of the workdir written last, or starts a new one', async () => {
    writeSession(A, conversation(1), { workdir: '/work/one', mtime: 1_000 });
    writeSession(B, conversation(1), { workdir: '/work/one', mtime: 2_000 });
    writeSession(C, conversation(1), { workdir: '/work/two', mtime: 3_000 });
    const run = await store.prepare({ kind: 'continue' }, '/work/one', { owner: '' });
    assert.deepEqual(run.engineSession, { kind: 'resume', sessionId: B });
    await run.release();
    const fresh = await store.prepare({ kind: 'continue' }, '/work/three', { owner: '' });
    assert.equal(fresh.engineSession.kind, 'new');
    await fresh.release();
  });

  it('does not continue a persistent agent\'s session', async () => {
    writeSession(A, conversation(1), { workdir: '/work/one' });
    await store.hide(A);
    const run = await store.prepare({ kind: 'continue' }, '/work/one', { owner: '' });
    assert.equal(run.engineSession.kind, 'new');
    await run.release();
  });

  it('leaves nothing behind for an ephemeral run', async () => {
    const run = await store.prepare({ kind: 'ephemeral' }, '/workspace', { owner: '' });
    assert.equal(run.persistent, false);
    writeFileSync(join(runDir(run), '.claude.json'), '{}');
    writeRunTranscript(run, run.sessionId, conversation(1));
    await run.release();
    assert.deepEqual(readdirSync(join(store.dir, '.runs')), []);
    assert.equal(existsSync(join(store.dir, run.sessionId)), false);
  });

  it('does not copy the hidden marker into a fork', async () => {
    writeSession(A, conversation(1));
    writeFileSync(join(store.dir, A, HIDDEN_MARKER), '');
    const run = await store.prepare({ kind: 'fork', fromSessionId: A }, '/workspace', { owner: '', presetId: B });
    writeRunTranscript(run, B, conversation(1));
    await run.release();
    assert.deepEqual((await service.list(SOLE_CALLER)).map((s) => s.id), [B]);
  });
});

describe('a run cut off by a crash of Berth', () => {
  it('leaves its transcript to its session: the next start carries it back and removes the run\'s directory', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A, runId: 'run-cut-off' });
    writeRunTranscript(run, A, conversation(1));
    // No release(): the process died. The next process starts on the same directory.
    const next = new SessionStore(join(root, 'sessions'), '/host/sessions', { transcriptLimitBytes: 1024 * 1024 });
    await next.init();
    const after = new SessionService({ store: next, maxPageSize: 10 });
    assert.equal((await after.messages(A, {}, SOLE_CALLER)).total, 2);
    assert.deepEqual(readdirSync(join(next.dir, '.runs')), []);
  });

  it('titles the session it carries back after the crash', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A, runId: 'run-cut-off' });
    await run.recordTitle!('Fix the login bug');
    writeRunTranscript(run, A, conversation(1));
    const next = new SessionStore(join(root, 'sessions'), '/host/sessions', { transcriptLimitBytes: 1024 * 1024 });
    await next.init();
    const titles = (await new SessionService({ store: next, maxPageSize: 10 }).list(SOLE_CALLER)).map((session) => session.title);
    assert.deepEqual(titles, ['Fix the login bug']);
  });

  it('keeps the directory of a run the next process follows again', async () => {
    const run = await store.prepare({ kind: 'new' }, '/workspace', { owner: '', presetId: A, runId: 'run-still-running' });
    await run.recordTitle!('Fix the login bug');
    const next = new SessionStore(join(root, 'sessions'), '/host/sessions', { transcriptLimitBytes: 1024 * 1024 });
    await next.init(new Set(['run-still-running']));
    assert.deepEqual(readdirSync(join(next.dir, '.runs')).sort(), ['run-still-running', 'run-still-running.session']);
    const reclaimed = await next.reclaim({ runId: 'run-still-running', sessionId: A, owner: '', workdir: '/workspace', persistent: true });
    assert.ok(reclaimed);
    writeRunTranscript({ mountPath: reclaimed.mountPath }, A, conversation(2));
    await reclaimed.release();
    assert.equal((await new SessionService({ store: next, maxPageSize: 10 }).messages(A, {}, SOLE_CALLER)).total, 4);
    // Titled as the run's first process noted it.
    assert.deepEqual((await new SessionService({ store: next, maxPageSize: 10 }).list(SOLE_CALLER)).map((session) => session.title), ['Fix the login bug']);
    assert.deepEqual(readdirSync(join(next.dir, '.runs')), []);
  });
});
