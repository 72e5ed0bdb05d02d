// @berth/client's hand-written convenience over a scripted fetch: run streams, agent events with
// reconnection, job polling, and paging.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Berth, BerthError, BerthNetworkError, type AgentEvent } from '../../packages/client/src/index.js';

type Route = (url: URL, request: Request) => Response | Promise<Response>;

function berthWith(route: Route) {
  const requests: URL[] = [];
  const fetch = (async (input: RequestInfo | URL) => {
    const request = input as Request;
    const url = new URL(request.url);
    requests.push(url);
    return route(url, request);
  }) as typeof globalThis.fetch;
  return { berth: new Berth({ url: 'http://berth.test', fetch, apiVersionCheck: 'off' }), requests };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const sse = (text: string) => new Response(text, { headers: { 'content-type': 'text/event-stream' } });

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

test('stream() sends the request as query parameters and ends with the done frame', async () => {
  const { berth, requests } = berthWith(() =>
    sse('data: {"type":"output","content":"he"}\n\n: ping\n\ndata: {"type":"output","content":"llo"}\n\ndata: {"type":"done","session_id":"s","id":"run-1"}\n\n'),
  );
  const frames = await collect(berth.stream({ prompt: 'say: hello', session_id: 's', resume: true }));
  assert.deepEqual(frames, [
    { type: 'output', content: 'he' },
    { type: 'output', content: 'llo' },
    { type: 'done', session_id: 's', id: 'run-1' },
  ]);
  assert.equal(requests[0]!.pathname, '/run/stream');
  assert.deepEqual(Object.fromEntries(requests[0]!.searchParams), { prompt: 'say: hello', session_id: 's', resume: 'true' });
});

test('a run stream that ends without done or error is a BerthNetworkError', async () => {
  const { berth } = berthWith(() => sse('data: {"type":"output","content":"he"}\n\n'));
  await assert.rejects(collect(berth.stream({ prompt: 'x' })), (error: Error) => error instanceof BerthNetworkError && /ended before the run finished/.test(error.message));
});

test('a refused stream is a BerthError with the server text', async () => {
  const { berth } = berthWith(() => json({ error: 'prompt must NOT have fewer than 1 characters', status: 'error' }, 400));
  await assert.rejects(collect(berth.stream({ prompt: '' })), { name: 'BerthError', status: 400, error: 'prompt must NOT have fewer than 1 characters' });
});

test('events() reconnects after a dropped stream and ends at exited', async () => {
  let connections = 0;
  const { berth } = berthWith(() => {
    connections += 1;
    if (connections === 1) return sse('event: turn_start\ndata: {"type":"turn_start","turn_id":"t1","at":"a"}\n\n');
    return sse('event: turn_end\ndata: {"type":"turn_end","turn_id":"t1","at":"b"}\n\nevent: exited\ndata: {"type":"exited","turn_id":"t1","content":"agent: stopped","at":"c"}\n\nevent: closed\ndata: {}\n\n');
  });
  const reconnects: number[] = [];
  const events = await collect(berth.agents.events('agent-1', { onReconnect: (attempt) => reconnects.push(attempt) }));
  assert.deepEqual(events.map((e: AgentEvent) => e.type), ['turn_start', 'turn_end', 'exited']);
  assert.equal(events[2]!.content, 'agent: stopped');
  assert.deepEqual(reconnects, [1]);
  assert.equal(connections, 2);
});

test('events() reconnects with Last-Event-ID, the id of the last event it yielded', async () => {
  const lastEventIds: (string | null)[] = [];
  const { berth } = berthWith((_url, request) => {
    lastEventIds.push(request.headers.get('last-event-id'));
    if (lastEventIds.length === 1) return sse('id: 7\nevent: turn_start\ndata: {"type":"turn_start","turn_id":"t1","at":"a"}\n\nid: 9\nevent: output\ndata: {"type":"output","turn_id":"t1","content":"x","at":"b"}\n\n');
    return sse('id: 12\nevent: turn_end\ndata: {"type":"turn_end","turn_id":"t1","at":"c"}\n\nid: 13\nevent: exited\ndata: {"type":"exited","turn_id":"t1","content":"agent: stopped","at":"d"}\n\nevent: closed\ndata: {}\n\n');
  });
  const events = await collect(berth.agents.events('agent-1'));
  assert.deepEqual(lastEventIds, [null, '9'], 'a first connection asks for live events; the reconnection resumes after 9');
  assert.deepEqual(events.map((e: AgentEvent) => [e.id, e.type]), [[7, 'turn_start'], [9, 'output'], [12, 'turn_end'], [13, 'exited']]);
});

test('events() resumes from a lastEventId given by the caller and yields an events_lost notice as it comes', async () => {
  const lastEventIds: (string | null)[] = [];
  const { berth } = berthWith((_url, request) => {
    lastEventIds.push(request.headers.get('last-event-id'));
    return sse('event: events_lost\ndata: {"type":"events_lost","after":3,"lost_through":40,"at":"a"}\n\nid: 41\nevent: exited\ndata: {"type":"exited","content":"gone","at":"b"}\n\n');
  });
  const events = await collect(berth.agents.events('agent-1', { lastEventId: 3 }));
  assert.deepEqual(lastEventIds, ['3']);
  assert.deepEqual(events, [
    { type: 'events_lost', after: 3, lost_through: 40, at: 'a' },
    { type: 'exited', content: 'gone', at: 'b', id: 41 },
  ]);
});

test('jobs.events() yields the statuses, reconnects with Last-Event-ID, and ends at closed', async () => {
  const lastEventIds: (string | null)[] = [];
  const { berth, requests } = berthWith((_url, request) => {
    lastEventIds.push(request.headers.get('last-event-id'));
    if (lastEventIds.length === 1) return sse('id: 4\nevent: status\ndata: {"type":"status","status":"pending","at":"a"}\n\n');
    return sse('id: 6\nevent: status\ndata: {"type":"status","status":"running","at":"b"}\n\nid: 9\nevent: status\ndata: {"type":"status","status":"completed","at":"c"}\n\nevent: closed\ndata: {}\n\n');
  });
  const events = await collect(berth.jobs.events('job-1'));
  assert.equal(requests[0]!.pathname, '/jobs/job-1/stream');
  assert.deepEqual(lastEventIds, [null, '4']);
  assert.deepEqual(events.map((e) => [e.id, e.status]), [[4, 'pending'], [6, 'running'], [9, 'completed']]);
});

test('events() ends at closed, whose data is empty', async () => {
  const { berth } = berthWith(() => sse('event: closed\ndata: {}\n\n'));
  assert.deepEqual(await collect(berth.agents.events('agent-1')), [{ type: 'closed' }]);
});

test('events() does not reconnect to an agent Berth does not know', async () => {
  const { berth, requests } = berthWith(() => json({ error: 'agent agent-x not found', status: 'error' }, 404));
  await assert.rejects(collect(berth.agents.events('agent-x')), (error: BerthError) => error instanceof BerthError && error.status === 404);
  assert.equal(requests.length, 1);
});

test('events() with reconnect off ends with the drop as a BerthNetworkError', async () => {
  const { berth } = berthWith(() => sse(''));
  await assert.rejects(collect(berth.agents.events('agent-1', { reconnect: false })), BerthNetworkError);
});

test('events() stops reconnecting when aborted', async () => {
  const { berth } = berthWith(() => sse(''));
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 600);
  await assert.rejects(collect(berth.agents.events('agent-1', { signal: controller.signal })), { name: 'AbortError' });
});

function jobAt(status: string) {
  return { id: 'job-1', status, output: '', session_id: 's', crash_info: null, error: null, created_at: 'c', updated_at: 'u', finished_at: null };
}

test('waitForJob polls with growing pauses, capped, and answers the final job', async () => {
  const statuses = ['pending', 'running', 'running', 'running', 'running', 'failed'];
  const polls: number[] = [];
  const { berth } = berthWith(() => {
    polls.push(Date.now());
    return json(jobAt(statuses.shift()!));
  });
  const seen: string[] = [];
  // Pauses of hundreds of milliseconds: the bounds below leave a loaded machine 100 ms and more of timer lag.
  const job = await berth.waitForJob('job-1', { interval: 200, maxInterval: 400, onUpdate: (j) => seen.push(j.status) });
  assert.equal(job.status, 'failed');
  assert.deepEqual(seen, ['pending', 'running', 'running', 'running', 'running', 'failed']);
  const gaps = polls.slice(1).map((at, i) => at - polls[i]!);
  assert.ok(gaps[0]! >= 195 && gaps[0]! < 300, `first pause ${gaps[0]}, not grown yet`);
  assert.ok(gaps[1]! >= 295, `second pause grows: ${gaps[1]}`);
  // Uncapped, the last two would be 675 and 1012 ms.
  assert.ok(gaps.slice(2).every((gap) => gap >= 395 && gap < 600), `capped pauses ${gaps.slice(2).join(', ')}`);
});

test('waitForJob gives up after its timeout with a TimeoutError naming the job', async () => {
  const { berth } = berthWith(() => json(jobAt('running')));
  await assert.rejects(berth.waitForJob('job-1', { interval: 20, timeout: 150 }), (error: Error) => error.name === 'TimeoutError' && /job job-1 .*running/.test(error.message));
});

test('waitForJob rejects with AbortError when aborted', async () => {
  const { berth } = berthWith(() => json(jobAt('pending')));
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  await assert.rejects(berth.waitForJob('job-1', { interval: 10, signal: controller.signal }), { name: 'AbortError' });
});

test('jobs.all() pages with limit and offset and yields no job twice when pages shift', async () => {
  const pages: Record<string, string[]> = { '0': ['j5', 'j4'], '2': ['j4', 'j3'], '4': ['j2'] };
  const { berth, requests } = berthWith((url) => json({ jobs: pages[url.searchParams.get('offset')!]!.map((id) => ({ id, status: 'completed', created_at: 'c' })) }));
  const ids = (await collect(berth.jobs.all({ limit: 2, status: 'completed' }))).map((j) => j.id);
  assert.deepEqual(ids, ['j5', 'j4', 'j3', 'j2']);
  assert.deepEqual(
    requests.map((u) => Object.fromEntries(u.searchParams)),
    ['0', '2', '4'].map((offset) => ({ status: 'completed', limit: '2', offset })),
  );
});

test('sessions.allMessages() follows has_more with the page size the server applied', async () => {
  const all = ['m1', 'm2', 'm3', 'm4', 'm5'];
  const { berth, requests } = berthWith((url) => {
    const offset = Number(url.searchParams.get('offset'));
    const limit = Math.min(2, Number(url.searchParams.get('limit') ?? 50)); // the server clamps to 2
    const messages = all.slice(offset, offset + limit).map((id) => ({ id, role: 'user', content: id }));
    return json({ messages, total: all.length, limit, offset, has_more: offset + limit < all.length });
  });
  const ids = (await collect(berth.sessions.allMessages('s', { limit: 10 }))).map((m) => m.id);
  assert.deepEqual(ids, all);
  assert.deepEqual(requests.map((u) => u.searchParams.get('offset')), ['0', '2', '4']);
});

test('images.get() encodes the slashes of a reference', async () => {
  const { berth, requests } = berthWith(() => json({ repository: 'localhost/berth-agent', tag: 'x' }));
  await berth.images.get('localhost/berth-agent:x');
  assert.equal(requests[0]!.pathname, '/images/localhost%2Fberth-agent%3Ax');
});
