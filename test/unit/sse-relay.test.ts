// relayFollowed over a real Fastify listener: the `/stream` routes' relay of a followed event log (ids on
// the `id:` line, `closed` without data), the subscription left when the log ends or the client goes, and
// the pace: waiting for a slow client's drain (agents) or not (jobs).
import assert from 'node:assert/strict';
import { get, type IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { relayFollowed, type FollowedEvents } from '../../src/http/sse.js';
import { waitFor } from '../support/wait.js';

/** A followed log for the test: its events, how many the relay took, whether it was left. */
class FakeFollowed implements FollowedEvents {
  taken = 0;
  closed = false;
  readonly events: AsyncIterable<{ readonly type: string }>;
  constructor(source: () => AsyncGenerator<{ readonly type: string }>) {
    const self = this;
    this.events = (async function* () {
      for await (const event of source()) {
        if (self.closed) return;
        self.taken += 1;
        yield event;
      }
    })();
  }
  close(): void {
    this.closed = true;
  }
}

const BIG = 'x'.repeat(16 * 1024);
/** Events of 16 KiB, as many as a client not reading lets through. */
const endless = async function* () {
  for (let i = 0; i < 2_000; i++) yield { type: 'output', content: BIG, id: i + 1 };
};

let app: FastifyInstance;
let base: string;
let current: FakeFollowed | undefined;
let source: () => AsyncGenerator<{ readonly type: string }> = endless;

before(async () => {
  app = Fastify();
  for (const waitForDrain of [true, false]) {
    app.get(`/${waitForDrain ? 'drained' : 'undrained'}`, async (_request, reply) => {
      current = new FakeFollowed(source);
      await relayFollowed(reply, { heartbeatMs: 60_000, maxBufferedBytes: 1024 ** 3 }, current, { waitForDrain });
    });
  }
  base = await app.listen({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  app.server.closeAllConnections();
  await app.close();
});

/** A client that connects and does not read (its response paused). */
function stalledClient(path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    get(`${base}${path}`, (response) => {
      response.pause();
      resolve(response);
    }).on('error', reject);
  });
}

describe('relayFollowed', () => {
  it('sends each event with its id on the id: line, closed without data, and leaves the log when it ends', async () => {
    source = async function* () {
      yield { type: 'status', status: 'running', id: 7 };
      yield { type: 'closed', reason: 'finished', id: 8 };
    };
    const text = await (await fetch(`${base}/undrained`)).text();
    assert.equal(text, 'id: 7\nevent: status\ndata: {"type":"status","status":"running"}\n\nid: 8\nevent: closed\ndata: {}\n\n');
    assert.equal(current!.closed, true);
  });

  it('leaves the log when the client goes', async () => {
    source = async function* () {
      yield { type: 'status', id: 1 };
      await new Promise(() => undefined);
    };
    const response = await stalledClient('/drained');
    await waitFor('the first event relayed', async () => (current!.taken === 1 ? true : undefined), 5_000);
    response.destroy();
    await waitFor('the subscription left', async () => (current!.closed ? true : undefined), 5_000);
  });

  it('waits for a slow client\'s drain when asked (the subscription\'s buffer fills, not the socket\'s), and not otherwise', async () => {
    source = endless;
    const slow = await stalledClient('/drained');
    // Let the socket's buffers fill: the relay then waits, taking no more events.
    let taken = -1;
    await waitFor('the relay waiting for the drain', async () => {
      const before = current!.taken;
      await new Promise((resolve) => setTimeout(resolve, 200));
      if (current!.taken === before) taken = before;
      return taken >= 0 ? true : undefined;
    }, 10_000);
    assert.ok(taken < 1_000, `a stalled client let ${taken} of 2000 events through`);
    slow.destroy();
    await waitFor('the drained subscription left', async () => (current!.closed ? true : undefined), 5_000);

    const unpaced = await stalledClient('/undrained');
    await waitFor('every event taken regardless', async () => (current!.taken === 2_000 ? true : undefined), 10_000);
    unpaced.destroy();
  });
});
