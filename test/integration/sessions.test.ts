// Sessions end to end: real Podman, the real engine image and the embedded offline model. Every run
// resumes, forks or continues the engine's own session files, and /sessions reads them back.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { poolReady, startTestBerth, type TestBerth } from '../support/berth.js';
import { transcriptFiles } from '../../src/engine/transcript.js';
import type { TokenUsage } from '../../src/engine/stream-json.js';
import { messagesIn, readSse } from '../support/sse.js';

const MAX_PAGE = 100;
let t: TestBerth;

before(async () => {
  t = await startTestBerth({ SERVICE_SESSIONS_MAX_PAGE_SIZE: String(MAX_PAGE) });
});
afterEach(async () => {
  assert.deepEqual(await t.leftovers(), []);
});
after(async () => {
  await t?.stop();
});

interface RunBody {
  prompt: string;
  workdir?: string;
  engine?: Record<string, unknown>;
}

async function run(body: RunBody): Promise<{ session_id: string; output: string; usage?: { token_usage: TokenUsage } }> {
  const response = await t.request('POST', '/run', body);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

async function messages(sessionId: string, query = ''): Promise<{ messages: { id: string; role: string; content: string }[]; total: number; has_more: boolean }> {
  const response = await t.request('GET', `/sessions/${sessionId}/messages${query}`);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

const sessionsDir = () => t.config.agent.sessionsDir;

describe('resume', () => {
  it('continues the conversation in a fresh container: recall lists both earlier prompts', async () => {
    const first = await run({ prompt: 'say: the lighthouse' });
    const second = await run({ prompt: 'say: the harbour', engine: { session_id: first.session_id, resume: true } });
    assert.equal(second.session_id, first.session_id);
    const third = await run({ prompt: 'recall:', engine: { session_id: first.session_id, resume: true } });
    assert.equal(third.output, 'say: the lighthouse\nsay: the harbour');
  });

  it('counts usage cumulatively for the session', async () => {
    const first = await run({ prompt: 'say: one' });
    const second = await run({ prompt: 'say: two', engine: { session_id: first.session_id, resume: true } });
    const once = first.usage!.token_usage;
    const twice = second.usage!.token_usage;
    assert.ok(twice.input_tokens > once.input_tokens, `input ${twice.input_tokens} ≤ ${once.input_tokens}`);
    assert.ok(twice.output_tokens > once.output_tokens, `output ${twice.output_tokens} ≤ ${once.output_tokens}`);
  });

  it('of a session that does not exist is a 404', async () => {
    const response = await t.request('POST', '/run', { prompt: 'hi', engine: { session_id: 'dddddddd-0000-4000-8000-000000000000', resume: true } });
    assert.equal(response.status, 404);
  });
});

describe('titles', () => {
  it('come from the first prompt, recorded as the engine\'s own title record, kept on resume and inherited by a fork', async () => {
    const { session_id } = await run({ prompt: 'Summarise the quarterly numbers for the board meeting next week please\nsay: ok' });
    const title = 'Summarise the quarterly numbers for the board meeting next…';
    const listed = async (id: string) => (await t.request('GET', '/sessions')).body.sessions.find((s: { id: string }) => s.id === id);
    assert.deepEqual(await listed(session_id), { id: session_id, title });
    const [file] = await transcriptFiles(join(sessionsDir(), session_id), session_id);
    assert.match(readFileSync(file!, 'utf8'), /"type":"custom-title","customTitle":"Summarise the quarterly/);
    // The engine reads the record back: a resumed run keeps the title, a fork inherits it.
    await run({ prompt: 'say: later', engine: { session_id, resume: true } });
    assert.deepEqual(await listed(session_id), { id: session_id, title });
    const fork = await run({ prompt: 'say: branch', engine: { session_id, fork_session: true } });
    assert.deepEqual(await listed(fork.session_id), { id: fork.session_id, title });
  });
});

describe('fork', () => {
  it('branches into a new session and leaves the original unchanged', async () => {
    const original = await run({ prompt: 'say: trunk' });
    const before = await messages(original.session_id);
    const fork = await run({ prompt: 'say: branch', engine: { session_id: original.session_id, fork_session: true } });
    assert.notEqual(fork.session_id, original.session_id);

    const afterFork = await messages(original.session_id);
    assert.equal(afterFork.total, before.total);
    assert.deepEqual(afterFork.messages, before.messages);
    const forked = await messages(fork.session_id);
    assert.equal(forked.total, before.total + 2);
    assert.deepEqual(forked.messages.slice(0, before.total), before.messages);
    assert.equal(forked.messages.at(-2)?.content, 'say: branch');
    const recall = await run({ prompt: 'recall:', engine: { session_id: fork.session_id, resume: true } });
    assert.equal(recall.output, 'say: trunk\nsay: branch');
  });
});

describe('continue', () => {
  it('picks the most recent session of the same workdir', async () => {
    await run({ prompt: 'say: older in one', workdir: '/work/one' });
    const latest = await run({ prompt: 'say: newer in one', workdir: '/work/one' });
    await run({ prompt: 'say: only in two', workdir: '/work/two' });
    const continued = await run({ prompt: 'recall:', workdir: '/work/one', engine: { continue: true } });
    assert.equal(continued.session_id, latest.session_id);
    assert.equal(continued.output, 'say: newer in one');
  });
});

describe('no_persistence', () => {
  it('leaves nothing behind and lists nothing', async () => {
    const listedBefore = (await t.request('GET', '/sessions')).body.sessions.length;
    const { session_id } = await run({ prompt: 'say: forget me', engine: { no_persistence: true } });
    assert.equal(existsSync(join(sessionsDir(), session_id)), false);
    // Answered at its result, the run removes its configuration directory right after.
    await t.berth.settled();
    // The pool's engines have configuration directories (and their disk images, runtime/run-disk.ts) of their
    // own, ready ahead of any request. The pool is not asked which: there are at most as many as it may hold.
    const runs = new Set(readdirSync(join(sessionsDir(), '.runs')).map((name) => name.replace(/\.(session|disk)$/, '')));
    const poolCapacity = t.config.pool.size + t.config.pool.agentSize;
    assert.ok(runs.size <= poolCapacity, `its configuration directory went with the run: ${runs.size} left, the pools hold at most ${poolCapacity}`);
    const listed = (await t.request('GET', '/sessions')).body.sessions;
    assert.equal(listed.length, listedBefore);
    assert.ok(!listed.some((s: { id: string }) => s.id === session_id));
    assert.equal((await t.request('GET', `/sessions/${session_id}/messages`)).status, 404);
  });
});

describe('messages', () => {
  it('page through a 120-message session returning every message exactly once', async () => {
    // Each prompt: itself, 19 tool calls and their results, and the answer = 40 messages.
    const turn = (n: number) => Array.from({ length: 19 }, (_, i) => `run: echo turn-${n}-step-${i}`).join('\n');
    const { session_id } = await run({ prompt: turn(0) });
    await run({ prompt: turn(1), engine: { session_id, resume: true } });
    await run({ prompt: turn(2), engine: { session_id, resume: true } });

    const whole = await messages(session_id, '?limit=1000');
    assert.equal(whole.total, 120);
    assert.equal(whole.messages.length, MAX_PAGE, 'a page is at most the configured maximum');
    const seen: string[] = [];
    assert.equal(whole.has_more, true, 'the clamped page is followed by more');
    for (let offset = 0; offset < 130; offset += 7) {
      const page = await messages(session_id, `?limit=7&offset=${offset}`);
      assert.equal(page.total, 120);
      assert.equal(page.has_more, offset + 7 < 120, `has_more at offset ${offset}`);
      seen.push(...page.messages.map((m) => m.id));
    }
    assert.equal(seen.length, 120);
    assert.equal(new Set(seen).size, 120);
    assert.deepEqual(seen.slice(0, MAX_PAGE), whole.messages.map((m) => m.id));

    const rest = await messages(session_id, `?offset=${MAX_PAGE}`);
    const all = [...whole.messages, ...rest.messages];
    assert.equal(all[0]?.content, turn(0));
    assert.equal(all[1]?.content, '[tool call Bash] {"command":"echo turn-0-step-0","description":"offline model run"}');
    assert.equal(all[2]?.content, '[tool result] turn-0-step-0');
    assert.equal(all[40]?.content, turn(1));
    assert.deepEqual(all.map((m) => m.role), Array.from({ length: 120 }, (_, i) => (i % 2 === 1 ? 'assistant' : 'user')));
  });

  it('one message by id, and 404 for an unknown one', async () => {
    const { session_id } = await run({ prompt: 'say: single' });
    const listed = await messages(session_id);
    const answer = listed.messages[1]!;
    const response = await t.request('GET', `/sessions/${session_id}/messages/${answer.id}`);
    assert.deepEqual(response, { ...response, status: 200, body: { id: answer.id, role: 'assistant', content: 'single' } });
    assert.equal((await t.request('GET', `/sessions/${session_id}/messages/eeeeeeee-0000-4000-8000-000000000000`)).status, 404);
  });
});

describe('delete', () => {
  it('removes the session, then answers 404', async () => {
    const { session_id } = await run({ prompt: 'say: doomed' });
    const deleted = await t.request('DELETE', `/sessions/${session_id}`);
    assert.deepEqual(deleted.body, { success: true, session_id });
    assert.equal(existsSync(join(sessionsDir(), session_id)), false);
    assert.equal((await t.request('GET', `/sessions/${session_id}/messages`)).status, 404);
    assert.equal((await t.request('DELETE', `/sessions/${session_id}`)).status, 404);
    assert.ok(!(await t.request('GET', '/sessions')).body.sessions.some((s: { id: string }) => s.id === session_id));
  });

  it('is refused with 409 while a run uses the session', async () => {
    const { session_id } = await run({ prompt: 'say: busy soon' });
    const running = run({ prompt: 'sleep: 4000\nsay: still here', engine: { session_id, resume: true } });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal((await t.request('DELETE', `/sessions/${session_id}`)).status, 409);
    await running;
    assert.equal((await t.request('DELETE', `/sessions/${session_id}`)).status, 200);
  });
});

describe('concurrent resumes', () => {
  it('do not corrupt the session: the second is refused with 409 at once, not queued; the transcript holds the accepted turn', async () => {
    const { session_id } = await run({ prompt: 'say: base' });
    // The first run streams its answer a word every 700 ms (GET /run/stream): once its first words arrived it
    // holds the session for seconds more, and the second is sent then: the overlap is certain.
    const firstPrompt = 'slow: 700\nsay: first racer one two three four five six';
    const first = await fetch(`${t.url}/run/stream?${new URLSearchParams({ prompt: firstPrompt, session_id })}`);
    assert.equal(first.status, 200);
    const frames: { type: string }[] = [];
    const reads = readSse(first);
    const readUntil = async (done: () => boolean) => {
      while (!done()) {
        const read = await reads.next();
        if (read.done) return;
        for (const { data } of messagesIn(read.value)) frames.push(JSON.parse(data) as { type: string });
      }
    };
    await readUntil(() => frames.some((f) => f.type === 'output'));
    const second = await t.request('POST', '/run', { prompt: 'say: second racer', engine: { session_id, resume: true } });
    assert.ok(!frames.some((f) => f.type === 'done' || f.type === 'error'), 'the first was still running when the second was answered');
    assert.equal(second.status, 409, JSON.stringify(second.body));
    assert.match(second.body.error, /in use by another run/);
    await readUntil(() => frames.some((f) => f.type === 'done' || f.type === 'error'));
    assert.equal(frames.at(-1)!.type, 'done', JSON.stringify(frames));

    const [file] = await transcriptFiles(join(sessionsDir(), session_id), session_id);
    for (const line of readFileSync(file!, 'utf8').split('\n').filter((l) => l !== '')) JSON.parse(line);
    const contents = (await messages(session_id)).messages.map((m) => m.content);
    assert.deepEqual(contents.filter((c) => c.includes('racer')), [firstPrompt, 'first racer one two three four five six'], 'only the accepted turn, whole');
    assert.equal(contents.length, 4);
  });
});

describe('session ids', () => {
  it('that name no session answer as a client expects: 404 with the error body (sess-example123, as stromboli\'s client sends)', async () => {
    const missing = '0f0f0f0f-0000-4000-8000-000000000000';
    for (const id of ['sess-example123', missing]) {
      for (const [method, path, headers] of [
        ['GET', `/sessions/${id}/messages`, {}],
        ['GET', `/sessions/${id}/messages?limit=10&offset=0`, {}],
        ['GET', `/sessions/${id}/messages/${missing}`, {}],
        ['DELETE', `/sessions/${id}`, {}],
        ['DELETE', `/sessions/${id}`, { 'content-type': 'application/json' }],
      ] as const) {
        const response = await t.request(method, path, undefined, headers);
        assert.deepEqual({ status: response.status, body: response.body }, { status: 404, body: { error: `session ${id} not found`, status: 'error' } }, `${method} ${path}`);
      }
    }
  });

  it('like ../../etc or sess-example123 name no session on the paths (404), are a 400 in a run, and touch no file', async () => {
    // The pools' engines have files of their own, made in the background: the listing is taken once both pools
    // are full, when no engine is started until a run claims one (and these requests run nothing). Nothing is
    // left out of it. The runs before have ended too: an answered run's engine finishes its files after the answer.
    await t.berth.settled();
    await poolReady(t, t.config.pool.size, 'run');
    await poolReady(t, t.config.pool.agentSize, 'agent');
    const files = () => (readdirSync(sessionsDir(), { recursive: true }) as string[]).sort();
    const before = files();
    for (const [method, path] of [
      ['GET', '/sessions/..%2F..%2Fetc/messages'],
      ['GET', '/sessions/..%2F..%2Fetc/messages/x'],
      ['DELETE', '/sessions/..%2F..%2Fetc'],
      ['GET', '/sessions/sess-example123/messages'],
      ['DELETE', '/sessions/sess-example123'],
    ] as const) {
      const response = await t.request(method, path);
      assert.equal(response.status, 404, `${method} ${path}`);
      assert.deepEqual(Object.keys(response.body).sort(), ['error', 'status']);
      assert.equal(response.body.status, 'error');
    }
    const resumed = await t.request('POST', '/run', { prompt: 'hi', engine: { session_id: '../../etc', resume: true } });
    assert.equal(resumed.status, 400);
    assert.deepEqual(files(), before);
  });
});
