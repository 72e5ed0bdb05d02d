import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventFanout, SUBSCRIBER_BUFFER } from '../../src/core/agents/subscription.js';
import type { AgentEvent } from '../../src/core/agents/agent-types.js';

const event = (n: number): AgentEvent => ({ type: 'output', content: String(n), at: '2026-01-01T00:00:00.000Z' });

test('each subscriber buffers 32 events; further events for a full subscriber are dropped', async () => {
  assert.equal(SUBSCRIBER_BUFFER, 32);
  const fanout = new EventFanout();
  const slow = fanout.subscribe();
  for (let n = 0; n < 40; n++) fanout.publish(event(n));
  assert.equal(slow.size, 32);
  assert.equal(slow.dropped, 8);
  fanout.finish([{ type: 'closed', at: 'x' }]);
  const contents: (string | undefined)[] = [];
  for await (const e of slow) contents.push(e.content ?? e.type);
  assert.deepEqual(contents, [...Array.from({ length: 32 }, (_, n) => String(n)), 'closed'], 'the end is delivered even to a full buffer');
});

test('a slow subscriber does not make another one lose events', async () => {
  const fanout = new EventFanout(2);
  const slow = fanout.subscribe();
  const fast = fanout.subscribe();
  const seen: string[] = [];
  const reading = (async () => {
    for await (const e of fast) seen.push(e.content ?? e.type);
  })();
  for (let n = 0; n < 5; n++) {
    fanout.publish(event(n));
    await new Promise((r) => setImmediate(r));
  }
  fanout.finish([]);
  await reading;
  assert.deepEqual(seen, ['0', '1', '2', '3', '4']);
  assert.equal(slow.dropped, 3);
});

test('a subscriber that leaves is removed from the fan-out and its iteration ends', async () => {
  const fanout = new EventFanout();
  const subscription = fanout.subscribe();
  assert.equal(fanout.count, 1);
  const reading = (async () => {
    const got: AgentEvent[] = [];
    for await (const e of subscription) got.push(e);
    return got;
  })();
  subscription.close();
  assert.deepEqual(await reading, []);
  assert.equal(fanout.count, 0);
  fanout.publish(event(1));
  assert.equal(subscription.size, 0);
});

test('a subscriber holds at most its byte budget of queued events, however large each is', () => {
  {
    const fanout = new EventFanout(1000);
    const slow = fanout.subscribe();
    const big = { type: 'output', turn_id: 't', content: 'x'.repeat(1024 * 1024), at: '' } as unknown as AgentEvent;
    for (let i = 0; i < 20; i++) fanout.publish(big);
    assert.ok(slow.size <= 4, `queued ${slow.size} one-MiB events`);
    assert.ok(slow.dropped >= 16);
  }
});
