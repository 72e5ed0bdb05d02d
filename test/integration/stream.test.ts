// GET /run/stream end to end: real Podman, the real engine, the offline model.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { readSse } from '../support/sse.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Piece {
  readonly at: number;
  /** A parsed `data:` frame, or the text of a comment line. */
  readonly frame?: any;
  readonly comment?: string;
}

/** Reads an event stream piece by piece until it ends, `stop` says so, or the signal aborts. */
async function readStream(response: Response, stop: (pieces: Piece[]) => boolean | Promise<boolean> = () => false): Promise<Piece[]> {
  const pieces: Piece[] = [];
  for await (const read of readSse(response)) {
    for (const piece of read) {
      pieces.push(piece.kind === 'message' ? { at: Date.now(), frame: JSON.parse(piece.message.data) } : { at: Date.now(), comment: piece.comment });
    }
    if (await stop(pieces)) return pieces;
  }
  return pieces;
}

const frames = (pieces: Piece[]) => pieces.filter((p) => p.frame !== undefined).map((p) => p.frame);

describe('GET /run/stream', () => {
  let t: TestBerth;
  const streamUrl = (query: Record<string, string>) => `${t.url}/run/stream?${new URLSearchParams(query)}`;

  before(async () => {
    t = await startTestBerth({ SERVICE_SSE_HEARTBEAT_INTERVAL: '1s' });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), [], 'no Berth container may outlive its stream');
  });
  after(async () => {
    await t.stop();
  });

  test('a slow answer arrives as several output frames before done', async () => {
    const answer = 'one two three four five six seven eight';
    const response = await fetch(streamUrl({ prompt: `slow: 300\nsay: ${answer}` }));
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const pieces = await readStream(response);
    const all = frames(pieces);
    const outputs = pieces.filter((p) => p.frame?.type === 'output');
    assert.ok(outputs.length >= 3, `expected several output frames, got ${JSON.stringify(all)}`);
    assert.equal(outputs.map((p) => p.frame.content).join(''), answer);
    assert.ok(outputs.at(-1)!.at - outputs[0]!.at >= 500, 'the pieces arrived as they were produced, not all at the end');
    const done = all.at(-1);
    assert.equal(done.type, 'done');
    assert.match(done.session_id, UUID);
    assert.match(done.id, /^run-/);
    assert.deepEqual(Object.keys(done).sort(), ['id', 'session_id', 'type']);
    assert.equal(all.filter((f) => f.type === 'done').length, 1);
  });

  test('session_id (resume implied) continues the conversation of a previous stream', async () => {
    const first = frames(await readStream(await fetch(streamUrl({ prompt: 'say: remember the tulip' }))));
    const sessionId = first.at(-1).session_id;
    const second = frames(await readStream(await fetch(streamUrl({ prompt: 'recall:', session_id: sessionId }))));
    assert.equal(second.at(-1).type, 'done');
    assert.equal(second.at(-1).session_id, sessionId);
    assert.match(second.filter((f) => f.type === 'output').map((f) => f.content).join(''), /remember the tulip/);
  });

  test('refusals before the stream starts are ordinary JSON errors', async () => {
    const missing = await fetch(`${t.url}/run/stream`);
    assert.equal(missing.status, 400);
    assert.match(missing.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(await missing.json(), { error: 'prompt is required', status: 'error' });

    const badWorkdir = await fetch(streamUrl({ prompt: 'hi', workdir: 'relative/dir' }));
    assert.equal(badWorkdir.status, 400);
    assert.match((await badWorkdir.json()).error, /workdir/);

    const resumeWithoutId = await fetch(streamUrl({ prompt: 'hi', resume: 'true' }));
    assert.equal(resumeWithoutId.status, 400);
    assert.match((await resumeWithoutId.json()).error, /session_id/);

    const unknownParameter = await fetch(streamUrl({ prompt: 'hi', model: 'opus' }));
    assert.equal(unknownParameter.status, 400);

    const unknownSession = await fetch(streamUrl({ prompt: 'hi', session_id: '00000000-0000-4000-8000-000000000000', resume: 'true' }));
    assert.equal(unknownSession.status, 404);
    assert.equal((await unknownSession.json()).status, 'error');
  });

  test('an engine failure after the stream started is an error frame', async () => {
    const response = await fetch(streamUrl({ prompt: 'fail: server' }));
    assert.equal(response.status, 200);
    const all = frames(await readStream(response));
    assert.equal(all.at(-1).type, 'error');
    assert.match(all.at(-1).error, /^engine failed: API Error: 500/);
    assert.equal(all.filter((f) => f.type === 'done').length, 0);
  });

  test('an idle stream gets heartbeats, and closing it early removes the container', async () => {
    const controller = new AbortController();
    const response = await fetch(streamUrl({ prompt: 'run: /bin/sleep 600' }), { signal: controller.signal });
    assert.equal(response.status, 200);
    const pieces = await readStream(response, async (seen) => seen.some((p) => p.comment === 'ping') && (await t.leftovers()).length === 1);
    assert.ok(pieces.some((p) => p.comment === 'ping'));
    controller.abort();
    const closed = Date.now();
    for (;;) {
      if ((await t.leftovers()).length === 0) break;
      assert.ok(Date.now() - closed < 10_000, 'the container is removed within seconds of the client leaving');
      await delay(100);
    }
  });
});
