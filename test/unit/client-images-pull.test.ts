// @berth/client's images.pull() over a scripted fetch: the JSON answer without onProgress, the event
// stream with it (progress frames reported, the error frame thrown as the BerthError it stands for).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Berth, BerthError, BerthNetworkError, type PullProgress } from '../../packages/client/src/index.js';

const RESULT = { success: true as const, image_id: 'f'.repeat(64), image: 'r.test/team/app:1' };

function berthAnswering(answer: (request: Request) => Response) {
  const requests: Request[] = [];
  const fetch = (async (input: RequestInfo | URL) => {
    const request = input as Request;
    requests.push(request);
    return answer(request);
  }) as typeof globalThis.fetch;
  return { berth: new Berth({ url: 'http://berth.test', fetch, apiVersionCheck: 'off' }), requests };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const sse = (...frames: unknown[]) =>
  new Response(frames.map((frame) => `data: ${JSON.stringify(frame)}\n\n`).join(': ping\n\n'), { headers: { 'content-type': 'text/event-stream; charset=utf-8' } });

test('without onProgress a pull asks for and answers the JSON form', async () => {
  const { berth, requests } = berthAnswering(() => json(RESULT));
  assert.deepEqual(await berth.images.pull('r.test/team/app:1', { platform: 'linux/arm64' }), RESULT);
  assert.notEqual(requests[0]!.headers.get('accept'), 'text/event-stream');
  assert.deepEqual(await requests[0]!.json(), { image: 'r.test/team/app:1', platform: 'linux/arm64' });
});

test('with onProgress a pull asks for the event stream and reports started, each progress frame, and done', async () => {
  const { berth, requests } = berthAnswering(() =>
    sse(
      { type: 'progress', message: 'Copying blob sha256:aaa', blobs_started: 1 },
      { type: 'progress', message: 'Copying config sha256:ccc', blobs_started: 1, blobs_done: 1 },
      { type: 'done', ...RESULT },
    ),
  );
  const progress: PullProgress[] = [];
  const result = await berth.images.pull('r.test/team/app:1', { onProgress: (p) => progress.push(p) });
  assert.deepEqual(result, RESULT);
  assert.equal(requests[0]!.headers.get('accept'), 'text/event-stream');
  assert.deepEqual(
    progress.map(({ elapsed_ms: _elapsed, ...rest }) => rest),
    [
      { phase: 'started', image: 'r.test/team/app:1' },
      { phase: 'progress', image: 'r.test/team/app:1', message: 'Copying blob sha256:aaa', blobs_started: 1 },
      { phase: 'progress', image: 'r.test/team/app:1', message: 'Copying config sha256:ccc', blobs_started: 1, blobs_done: 1 },
      { phase: 'done', image: 'r.test/team/app:1', result: RESULT },
    ],
  );
});

test('an error frame rejects with a BerthError carrying its text and status', async () => {
  const error = 'image "r.test/team/app:1" not found: registry r.test has no such repository or tag';
  const { berth } = berthAnswering(() => sse({ type: 'progress', message: 'Trying to pull r.test/team/app:1...', blobs_started: 0 }, { type: 'error', error, status: 404 }));
  await assert.rejects(berth.images.pull('r.test/team/app:1', { onProgress: () => undefined }), (e: unknown) => e instanceof BerthError && e.status === 404 && e.error === error);
});

test('a refusal before the stream is the BerthError of the JSON answer', async () => {
  const { berth } = berthAnswering(() => json({ error: 'image "x" is not allowed', status: 'error' }, 400));
  await assert.rejects(berth.images.pull('x', { onProgress: () => undefined }), { name: 'BerthError', status: 400, error: 'image "x" is not allowed' });
});

test('a stream that ends without done or error is a BerthNetworkError', async () => {
  const { berth } = berthAnswering(() => sse({ type: 'progress', message: 'Copying blob sha256:aaa', blobs_started: 1 }));
  await assert.rejects(berth.images.pull('r.test/team/app:1', { onProgress: () => undefined }), BerthNetworkError);
});

test('a server that answers JSON although the stream was asked for is understood', async () => {
  const { berth } = berthAnswering(() => json(RESULT));
  const phases: string[] = [];
  assert.deepEqual(await berth.images.pull('r.test/team/app:1', { onProgress: (p) => phases.push(p.phase) }), RESULT);
  assert.deepEqual(phases, ['started', 'done']);
});
