// Finding 8, performed against a real Berth on real Podman: an event-stream client that never reads while
// an agent produces megabytes, subscribers piling up on one agent, and streams piling up on the server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { waitForStatus } from '../support/agents.js';
import { waitFor } from '../support/wait.js';

/**
 * A client that opens an event stream and never reads it: a process of its own whose socket has the smallest
 * receive buffer (SO_RCVBUF, which Node does not offer), so that the kernel takes little off Berth's hands
 * and what the client does not read stays with Berth. Answers the client's port once its request is sent.
 */
async function stalledStream(url: string, path: string): Promise<{ port: number; process: ChildProcess }> {
  const { hostname, port } = new URL(url);
  const script = [
    'import socket, sys, time',
    's = socket.socket()',
    's.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)',
    `s.connect((${JSON.stringify(hostname)}, ${Number(port)}))`,
    `s.sendall(${JSON.stringify(`GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAccept: text/event-stream\r\n\r\n`)}.encode())`,
    'print(s.getsockname()[1], flush=True)',
    'time.sleep(600)',
  ].join('\n');
  const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return { port: Number(line.toString().trim()), process: child };
}

/**
 * What the server holds unread for one client: the bytes queued on the server's side of its connection
 * (written by Berth, not yet taken by the kernel), sampled every 50 ms from the first request on. The client
 * is named by its own port; `peak` is the most seen, `now` what is held at this moment (0 once closed).
 */
function serverBuffers(t: TestBerth): {
  has(clientPort: number): boolean;
  now(clientPort: number): number;
  peak(clientPort: number): number;
  /** Resolves when the server's side of the client's connection has closed. */
  closed(clientPort: number): Promise<void>;
  stop(): void;
} {
  const sockets = new Map<number, Socket>();
  const peaks = new Map<number, number>();
  const closings = new Map<number, Promise<void>>();
  const track = (socket: Socket) => {
    const port = socket.remotePort!;
    sockets.set(port, socket);
    closings.set(port, new Promise((resolve) => socket.once('close', () => resolve())));
    socket.once('close', () => sockets.delete(port));
  };
  const server = t.berth.app.server;
  server.on('connection', track);
  const now = (port: number) => sockets.get(port)?.writableLength ?? 0;
  const sample = () => {
    for (const port of sockets.keys()) peaks.set(port, Math.max(peaks.get(port) ?? 0, now(port)));
  };
  const sampler = setInterval(sample, 50);
  return {
    has: (port) => sockets.has(port),
    now,
    closed: async (port) => {
      await closings.get(port);
    },
    peak: (port) => {
      sample();
      return peaks.get(port) ?? 0;
    },
    stop: () => {
      clearInterval(sampler);
      server.off('connection', track);
    },
  };
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

  test('a client that never reads costs a bounded buffer and is cut off; the agent and other clients go on', async () => {
    const buffers = serverBuffers(t);
    const agent = (await t.request('POST', '/agents', {})).body;
    await waitForStatus(t, agent.id, 'idle', 60_000);
    const stalled = await stalledStream(t.url, `/agents/${agent.id}/stream`);
    const port = stalled.port;
    await waitFor('the server to see the stalled client', async () => buffers.has(port) || undefined, 10_000, 20);
    try {
      const reader = fetch(`${t.url}/agents/${agent.id}/stream`).then(async (response) => response.text());
      // Awaited below; a failure before that must fail the test, not become an unhandled rejection.
      reader.catch(() => undefined);
      await delay(300);
      const frameBytes = 4 * 1024 * 1024;
      for (let turn = 0; turn < 3; turn++) {
        const sent = await t.request('POST', `/agents/${agent.id}/send`, { prompt: `say: ${String(turn).repeat(frameBytes)}` });
        assert.equal(sent.status, 200, JSON.stringify(sent.body).slice(0, 300));
        await waitForStatus(t, agent.id, 'idle', 60_000);
      }
      // Once more than SERVICE_SSE_MAX_BUFFER (256k) is left unread at two frames in a row the server ends the
      // stalled client's response (test/unit/sse-helper.test.ts): its socket is closed by the server, while
      // the client still reads nothing. The heartbeat (1 s) is a frame too, so this comes within seconds.
      await Promise.race([
        buffers.closed(port),
        delay(20_000).then(() => assert.fail(`the server never closed the stream of a client that does not read (${buffers.now(port)} bytes unread now, ${buffers.peak(port)} at most)`)),
      ]);
      // What it held for that client is bounded: the limit plus the frames written before the cut (at most
      // two: a large answer and the frame after it).
      const limit = 256 * 1024;
      const twoFrames = 2 * (frameBytes + 64 * 1024);
      assert.ok(buffers.peak(port) > limit, `the stream filled up to the limit (${buffers.peak(port)} bytes unread at most)`);
      assert.ok(buffers.peak(port) <= limit + twoFrames, `the server held at most ${buffers.peak(port)} bytes unread for it`);
      // And nothing once it is cut off: the agent's next turns are no longer queued for it.
      const before = (await t.request('GET', `/agents/${agent.id}`)).body.turns_completed as number;
      assert.ok(before >= 2, `the agent went on with its turns (${before} completed)`);
      assert.equal((await t.request('POST', `/agents/${agent.id}/send`, { prompt: 'say: still here' })).status, 200);
      await waitForStatus(t, agent.id, 'idle', 60_000);
      assert.equal((await t.request('GET', `/agents/${agent.id}`)).body.turns_completed, before + 1, 'and still answers');
      assert.equal(buffers.now(port), 0, 'nothing is held for the client cut off');
      assert.equal((await t.request('DELETE', `/agents/${agent.id}`)).status, 204);
      const seen = await reader;
      assert.match(seen, /still here/, 'a reading client got the latest turn');
      assert.match(seen, /event: exited/, 'and the end of the agent');
    } finally {
      buffers.stop();
      stalled.process.kill();
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
