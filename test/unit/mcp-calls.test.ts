import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpCalls } from '../../src/http/mcp-calls.js';

/** A server that records whether it was closed. */
function server(): McpServer & { closed: boolean } {
  const fake = { closed: false, close: async () => { fake.closed = true; } };
  return fake as unknown as McpServer & { closed: boolean };
}

const call = (id: string | number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_prompt', arguments: {} } });
const cancelled = (requestId: string | number) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } });

test('a cancellation closes the call it names, sent with the same Authorization header', async () => {
  const calls = new McpCalls();
  const running = server();
  calls.track('Bearer a', call(7), running);
  await calls.cancel('Bearer a', cancelled(7));
  assert.equal(running.closed, true);
});

test("another caller's cancellation of the same id closes nothing", async () => {
  const calls = new McpCalls();
  const running = server();
  calls.track('Bearer a', call(7), running);
  await calls.cancel('Bearer b', cancelled(7));
  await calls.cancel(undefined, cancelled(7));
  assert.equal(running.closed, false);
});

test('two calls of one caller under one id are ambiguous: neither is cancelled', async () => {
  const calls = new McpCalls();
  const first = server();
  const second = server();
  calls.track('Bearer a', call(1), first);
  calls.track('Bearer a', call(1), second);
  await calls.cancel('Bearer a', cancelled(1));
  assert.deepEqual([first.closed, second.closed], [false, false]);
});

test('a released call is no longer found; messages other than tools/call are not tracked', async () => {
  const calls = new McpCalls();
  const running = server();
  calls.track('Bearer a', call('x'), running)();
  await calls.cancel('Bearer a', cancelled('x'));
  const listing = server();
  calls.track('Bearer a', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, listing);
  await calls.cancel('Bearer a', cancelled(3));
  assert.deepEqual([running.closed, listing.closed], [false, false]);
});
