import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BerthError, BerthNetworkError, type Berth } from '../../packages/client/src/index.js';
import { contentBytes, fileContent, readAtMost, toolResult } from '../../packages/mcp/src/results.js';
import { readAgentOutput } from '../../packages/mcp/src/agent-output.js';

test("a tool's value is its JSON text and its structured content", async () => {
  assert.deepEqual(await toolResult(async () => ({ output: 'hi' })), { content: [{ type: 'text', text: '{\n  "output": "hi"\n}' }], structuredContent: { output: 'hi' } });
});

test("Berth's refusal is a tool error with Berth's text; an unreachable Berth too; anything else is thrown", async () => {
  assert.deepEqual(await toolResult(async () => { throw new BerthError(404, 'session x not found'); }), {
    isError: true, content: [{ type: 'text', text: 'session x not found' }], structuredContent: { error: 'session x not found', status: 404 },
  });
  assert.deepEqual(await toolResult(async () => { throw new BerthNetworkError('GET http://x/sessions failed: refused'); }), {
    isError: true, content: [{ type: 'text', text: 'GET http://x/sessions failed: refused' }],
  });
  await assert.rejects(toolResult(async () => { throw new TypeError('bug'); }), TypeError);
});

test('file bytes come back as UTF-8 text when they are text, else as base64', () => {
  assert.deepEqual(fileContent(Buffer.from('héllo\n')), { encoding: 'utf8', content: 'héllo\n' });
  assert.deepEqual(fileContent(Buffer.from([0x61, 0x00])), { encoding: 'base64', content: 'YQA=' });
  assert.deepEqual(fileContent(Buffer.from([0xff, 0xfe])), { encoding: 'base64', content: '//4=' });
  assert.deepEqual(Buffer.from(contentBytes('//4=', 'base64')), Buffer.from([0xff, 0xfe]));
});

test('readAtMost cuts a stream at the limit and says so', async () => {
  const stream = (chunks: string[]) => new ReadableStream<Uint8Array>({ start(c) { for (const chunk of chunks) c.enqueue(Buffer.from(chunk)); c.close(); } });
  const cut = await readAtMost(stream(['abc', 'def']), 4);
  assert.deepEqual([Buffer.from(cut.bytes).toString(), cut.truncated], ['abcd', true]);
  const whole = await readAtMost(stream(['abc', 'def']), 6);
  assert.deepEqual([Buffer.from(whole.bytes).toString(), whole.truncated], ['abcdef', false]);
});

/** A Berth whose agent events are these, in order. */
function berthWithEvents(events: object[]): Berth {
  return { agents: { async *events() { yield* events; } } } as unknown as Berth;
}

test("an agent's output is read up to the end of the next turn: the assistant's text and the result", async () => {
  const line = (value: object) => JSON.stringify(value);
  const output = await readAgentOutput(berthWithEvents([
    { type: 'turn_start', turn_id: 't1', id: 10 },
    { type: 'output', turn_id: 't1', id: 11, content: line({ type: 'system', subtype: 'init' }) },
    { type: 'output', turn_id: 't1', id: 12, content: line({ type: 'assistant', message: { content: [{ type: 'text', text: 'hel' }, { type: 'tool_use' }] } }) },
    { type: 'output', turn_id: 't1', id: 13, content: line({ type: 'assistant', message: { content: [{ type: 'text', text: 'lo' }] } }) },
    { type: 'output', turn_id: 't1', id: 14, content: 'not json' },
    { type: 'error', turn_id: 't1', id: 15, content: 'a stderr line' },
    { type: 'output', turn_id: 't1', id: 16, content: line({ type: 'result', result: 'hello', is_error: false }) },
    { type: 'turn_end', turn_id: 't1', id: 17 },
    { type: 'turn_start', turn_id: 't2', id: 18 },
  ]), 'agent-1', { after: 0, waitMs: 5000 });
  assert.deepEqual(output, { last_event_id: 17, state: 'turn_ended', errors: [], turns: [{ turn_id: 't1', text: 'hello', result: 'hello', is_error: false, errors: ['a stderr line'] }] });
});

test("an agent that exits ends the read with its exit error", async () => {
  const output = await readAgentOutput(berthWithEvents([
    { type: 'events_lost', after: 3 },
    { type: 'exited', id: 30, content: 'agent: idle timeout reached' },
  ]), 'agent-1', { after: 3, waitMs: 5000 });
  assert.deepEqual(output, { last_event_id: 30, state: 'exited', turns: [], errors: [], exit_error: 'agent: idle timeout reached', events_lost: true });
});

test('a wait that elapses first answers what came so far, state waiting', async () => {
  const berth = { agents: { async *events(_id: string, options: { signal: AbortSignal }) {
    yield { type: 'turn_start', turn_id: 't1', id: 5 };
    await new Promise((_resolve, reject) => options.signal.addEventListener('abort', () => reject(options.signal.reason)));
  } } } as unknown as Berth;
  // AbortSignal.timeout does not hold the event loop open; a server's sockets do, this timer here.
  const alive = setTimeout(() => undefined, 5000);
  const output = await readAgentOutput(berth, 'agent-1', { after: 4, waitMs: 50 });
  clearTimeout(alive);
  assert.deepEqual(output, { last_event_id: 5, state: 'waiting', turns: [{ turn_id: 't1', text: '', errors: [] }], errors: [] });
});
