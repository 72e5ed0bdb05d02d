// Finding 8, performed against a real Berth on real Podman: an event-stream client that never reads while
// an agent produces megabytes, subscribers piling up on one agent, and streams piling up on the server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { waitForStatus } from '../support/agents.js';

/** Opens an event stream over a raw socket and never reads it: the kernel buffers fill, then Berth's. */
async function stalledStream(url: string, path: string): Promise<{ socket: Socket; closed: Promise<void> }> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAccept: text/event-stream\r\n\r\n`);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  await delay(200);
  socket.pause();
  return { socket, closed };
}

describe('event streams under abuse', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({
      SERVICE_SSE_MAX_BUFFER: '256k',
      SERVICE_SSE_HEARTBEAT_INTERVAL: '1s',
      SERVICE_AGENT_MAX_SUBSCRIBERS: '3',
      SERVICE_SSE_MAX_STREAMS: '5',
      SERVICE_MAX_PROMPT_BYTES: String(8 * 1024 * 1024),
      SERVICE_MAX_BODY_BYTES: String(16 * 1024 * 1024),
    });
  });
  after(async () => {
    await t?.stop();
  });

  test('a client that never reads costs a bounded buffer; the agent and other clients go on', async () => {
    const agent = (await t.request('POST', '/agents', {})).body;
    await waitForStatus(t, agent.id, 'idle', 60_000);
    const stalled = await stalledStream(t.url, `/agents/${agent.id}/stream`);
    try {
    const reader = fetch(`${t.url}/agents/${agent.id}/stream`).then(async (response) => response.text());
    // Awaited below; a failure before that must fail the test, not become an unhandled rejection.
    reader.catch(() => undefined);
    await delay(300);
    for (let turn = 0; turn < 3; turn++) {
      const sent = await t.request('POST', `/agents/${agent.id}/send`, { prompt: `say: ${String(turn).repeat(4 * 1024 * 1024)}` });
      assert.equal(sent.status, 200, JSON.stringify(sent.body).slice(0, 300));
      await waitForStatus(t, agent.id, 'idle', 60_000);
    }
    // Its subscription drops what it cannot hold (4 MiB, test/unit/agents-subscription.test.ts) and its
    // response is cut off once more than SERVICE_SSE_MAX_BUFFER is left unread (test/unit/sse-helper.test.ts).
    const before = (await t.request('GET', `/agents/${agent.id}`)).body.turns_completed as number;
    assert.ok(before >= 2, `the agent went on with its turns (${before} completed)`);
    assert.equal((await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: still here' })).status, 200);
    await waitForStatus(t, agent.id, 'idle', 60_000);
    assert.equal((await t.request('GET', `/agents/${agent.id}`)).body.turns_completed, before + 1, 'and still answers');
    assert.equal((await t.request('DELETE', `/agents/${agent.id}`)).status, 204);
    const seen = await reader;
    assert.match(seen, /still here/, 'a reading client got the latest turn');
    assert.match(seen, /event: exited/, 'and the end of the agent');
    } finally {
      stalled.socket.destroy();
    }
  });

  test('subscribers per agent and streams per server are capped, before the stream starts', async () => {
    const metrics = async () => Number(/^berth_sse_subscribers (\d+)$/m.exec(await (await fetch(t.berth.metricsUrl)).text())?.[1]);
    for (let i = 0; (await metrics()) > 0; i++) {
      assert.ok(i < 40, 'the streams of the previous test end');
      await delay(100);
    }
    const agent = (await t.request('POST', '/agents', {})).body;
    const controllers: AbortController[] = [];
    const open = async (path: string) => {
      const controller = new AbortController();
      controllers.push(controller);
      return fetch(`${t.url}${path}`, { signal: controller.signal });
    };
    for (let i = 0; i < 3; i++) assert.equal((await open(`/agents/${agent.id}/stream`)).status, 200);
    const fourth = await open(`/agents/${agent.id}/stream`);
    assert.equal(fourth.status, 429);
    assert.match((await fourth.json()).error, /SERVICE_AGENT_MAX_SUBSCRIBERS/);
    const second = (await t.request('POST', '/agents', {})).body;
    for (let i = 0; i < 2; i++) assert.equal((await open(`/agents/${second.id}/stream`)).status, 200);
    const sixth = await open(`/agents/${second.id}/stream`);
    assert.equal(sixth.status, 503);
    assert.match((await sixth.json()).error, /SERVICE_SSE_MAX_STREAMS/);
    for (const controller of controllers) controller.abort();
    await delay(300);
    assert.equal((await open(`/agents/${second.id}/stream`)).status, 200, 'closed streams free their places');
    for (const controller of controllers) controller.abort();
    for (const id of [agent.id, second.id]) assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
    for (let i = 0; (await t.leftovers()).length > 0; i++) {
      assert.ok(i < 40);
      await delay(250);
    }
  });
});
