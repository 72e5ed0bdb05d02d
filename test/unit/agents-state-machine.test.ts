import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from '../../src/core/agents/agent.js';
import { READY_REQUEST, turnLine } from '../../src/engine/stream-json-input.js';
import type { AgentEvent } from '../../src/core/agents/agent-types.js';
import type { ReadLine } from '../../src/core/agents/line-reader.js';
import { BerthError } from '../../src/errors.js';

const line = (text: string): ReadLine => ({ kind: 'line', text });
const READY = line('{"type":"control_response","response":{"subtype":"success","request_id":"berth-ready","response":{}}}');
const RESULT_OK = line('{"duration_ms":5,"type":"result","subtype":"success","is_error":false,"result":"hi"}');
const RESULT_FAILED = line('{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: 529 overloaded"}');

function makeAgent(options: { firstPrompt?: string; idleTimeoutSeconds?: number; disabled?: boolean } = {}) {
  let clock = 1_000_000;
  const written: string[] = [];
  let turns = 0;
  const agent = new Agent({
    id: 'agent-1',
    sessionId: 'session-1',
    idleTimeoutSeconds: options.idleTimeoutSeconds ?? 60,
    idleTimeoutDisabled: options.disabled ?? false,
    ...(options.firstPrompt !== undefined ? { firstPrompt: options.firstPrompt } : {}),
    write: async (l) => {
      written.push(l);
    },
    now: () => clock,
    newTurnId: () => `turn-${++turns}`,
  });
  const subscription = agent.subscribe();
  const received: AgentEvent[] = [];
  const reading = (async () => {
    for await (const event of subscription) received.push(event);
  })();
  return { agent, written, received, reading, advance: (ms: number) => (clock += ms) };
}

const statusOf = (error: unknown) => (error as BerthError).status;

test('an agent starts in starting and refuses sends with 503 until its engine prints a line', () => {
  const { agent } = makeAgent();
  assert.equal(agent.status, 'starting');
  assert.equal(agent.snapshot().turns_completed, 0);
  assert.throws(() => agent.send('hi'), (e) => statusOf(e) === 503);
  agent.stdout(READY);
  assert.equal(agent.status, 'idle');
});

test('the readiness answer is not forwarded as output', async () => {
  const { agent, received } = makeAgent();
  agent.stdout(READY);
  agent.exit('agent: test');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(received.map((e) => e.type), ['exited', 'closed']);
});

test('a send writes one stream-json line, emits turn_start and moves to generating; a second send gets 409', () => {
  const { agent, written } = makeAgent();
  agent.stdout(READY);
  const turn = agent.send('hello');
  assert.equal(turn.id, 'turn-1');
  assert.equal(agent.status, 'generating');
  assert.deepEqual(written, [turnLine('hello')]);
  assert.deepEqual(JSON.parse(written[0]!), { type: 'user', message: { role: 'user', content: 'hello' } });
  assert.throws(() => agent.send('again'), (e) => statusOf(e) === 409);
});

test('output lines are forwarded verbatim with the turn id; the result line ends the turn with turn_end', async () => {
  const { agent, received } = makeAgent();
  agent.stdout(READY);
  agent.send('hello');
  agent.stdout(line('{"type":"assistant","message":{}}'));
  agent.stdout(RESULT_OK);
  assert.equal(agent.status, 'idle');
  assert.equal(agent.snapshot().turns_completed, 1);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(received.map((e) => [e.type, e.turn_id, e.content]), [
    ['turn_start', 'turn-1', undefined],
    ['output', 'turn-1', '{"type":"assistant","message":{}}'],
    ['output', 'turn-1', RESULT_OK.kind === 'line' ? RESULT_OK.text : ''],
    ['turn_end', 'turn-1', undefined],
  ]);
});

test('a failed turn emits error with the engine\'s text, returns to idle and does not count as completed', async () => {
  const { agent, received } = makeAgent();
  agent.stdout(READY);
  agent.send('hello');
  agent.stdout(RESULT_FAILED);
  assert.equal(agent.status, 'idle');
  assert.equal(agent.snapshot().turns_completed, 0);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(received.at(-1), { type: 'error', turn_id: 'turn-1', content: 'API Error: 529 overloaded', at: received.at(-1)!.at });
});

test('a truncated result line still ends its turn', () => {
  const { agent } = makeAgent();
  agent.stdout(READY);
  agent.send('hello');
  agent.stdout({ kind: 'truncated', bytes: 11 * 1024 * 1024, head: '{"duration_ms":1', resultMark: true, errorMark: false });
  assert.equal(agent.status, 'idle');
  assert.equal(agent.snapshot().turns_completed, 1);
});

test('a first prompt is sent as soon as the engine is ready', () => {
  const { agent, written } = makeAgent({ firstPrompt: 'first' });
  assert.deepEqual(written, []);
  agent.stdout(READY);
  assert.equal(agent.status, 'generating');
  assert.deepEqual(written, [turnLine('first')]);
});

test('a turn the engine does not take: its delivery rejects and an error event of its turn says why; the turn stays in progress until the agent ends', async () => {
  const agent = new Agent({
    id: 'agent-1', sessionId: 'session-1', idleTimeoutSeconds: 60, idleTimeoutDisabled: false,
    write: () => Promise.reject(new Error('agent agent-1 did not take the turn within 30s')),
    newTurnId: () => 'turn-1',
  });
  const received: AgentEvent[] = [];
  const reading = (async () => {
    for await (const event of agent.subscribe()) received.push(event);
  })();
  agent.stdout(READY);
  const turn = agent.send('hello');
  assert.equal(turn.id, 'turn-1');
  await assert.rejects(turn.delivered, /did not take the turn within 30s/);
  assert.equal(agent.status, 'generating', 'a second turn is not written behind a partial one');
  assert.throws(() => agent.send('again'), (e) => statusOf(e) === 409);
  agent.exit('agent: stopped');
  await reading;
  assert.deepEqual(received.map((e) => [e.type, e.turn_id, e.content]).slice(0, 2), [
    ['turn_start', 'turn-1', undefined],
    ['error', 'turn-1', 'could not send the turn to the engine: agent agent-1 did not take the turn within 30s'],
  ]);
});

test('stderr lines become error events', async () => {
  const { agent, received } = makeAgent();
  agent.stdout(READY);
  agent.stderr(line('warning: something'));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(received.map((e) => [e.type, e.content]), [['error', 'warning: something']]);
});

test('exit emits exited with the reason, then closed; later sends get 410 and the snapshot carries exit_error', async () => {
  const { agent, received, reading } = makeAgent();
  agent.stdout(READY);
  agent.send('hello');
  agent.exit('agent: the engine exited with code 1');
  await reading;
  assert.deepEqual(received.slice(-2).map((e) => [e.type, e.turn_id, e.content]), [
    ['exited', 'turn-1', 'agent: the engine exited with code 1'],
    ['closed', undefined, undefined],
  ]);
  assert.equal(agent.status, 'exited');
  assert.equal(agent.snapshot().exit_error, 'agent: the engine exited with code 1');
  assert.throws(() => agent.send('hello'), (e) => statusOf(e) === 410);
  agent.stdout(RESULT_OK);
  assert.equal(agent.snapshot().turns_completed, 0, 'output after the exit changes nothing');
});

test('a subscriber of an exited agent receives exited and closed at once', async () => {
  const { agent } = makeAgent();
  agent.exit('agent: idle timeout reached');
  const events: AgentEvent[] = [];
  for await (const event of agent.subscribe()) events.push(event);
  assert.deepEqual(events.map((e) => [e.type, e.content]), [['exited', 'agent: idle timeout reached'], ['closed', undefined]]);
});

test('the snapshot has exactly the documented fields; idle_timeout_disabled only when true', () => {
  const plain = makeAgent().agent.snapshot();
  assert.deepEqual(Object.keys(plain).sort(), ['created_at', 'id', 'idle_timeout_seconds', 'last_activity_at', 'session_id', 'status', 'turns_completed']);
  const disabled = makeAgent({ disabled: true }).agent.snapshot();
  assert.equal(disabled.idle_timeout_disabled, true);
});

test('idleExpired: only idle agents, only after the timeout since the last send or turn end, never when disabled', () => {
  const { agent, advance } = makeAgent({ idleTimeoutSeconds: 10 });
  const now = () => Date.parse(agent.snapshot().last_activity_at);
  assert.equal(agent.idleExpired(now() + 60_000), false, 'starting agents are not idle');
  agent.stdout(READY);
  assert.equal(agent.idleExpired(now() + 9_999), false);
  assert.equal(agent.idleExpired(now() + 10_000), true);
  advance(5_000);
  agent.send('x');
  assert.equal(agent.idleExpired(now() + 60_000), false, 'generating agents are not idle');
  const { agent: forever } = makeAgent({ idleTimeoutSeconds: 1, disabled: true });
  forever.stdout(READY);
  assert.equal(forever.idleExpired(Date.now() + 10 ** 9), false);
});

test('READY_REQUEST is an initialize control request', () => {
  assert.deepEqual(JSON.parse(READY_REQUEST), { type: 'control_request', request_id: 'berth-ready', request: { subtype: 'initialize' } });
});

test('a failed turn ends with the error the service names (a budget refusal during the turn), given the turn\'s start', async () => {
  let clock = 5_000;
  const asked: [string, number][] = [];
  const agent = new Agent({
    id: 'agent-1',
    sessionId: 'session-1',
    idleTimeoutSeconds: 60,
    idleTimeoutDisabled: false,
    write: async () => undefined,
    now: () => clock,
    newTurnId: () => 'turn-1',
    turnError: (message, startedMs) => {
      asked.push([message, startedMs]);
      return 'model budget reached: this run\'s max_budget_usd (0.01 USD) is spent';
    },
  });
  const subscription = agent.subscribe();
  const received: AgentEvent[] = [];
  const reading = (async () => {
    for await (const event of subscription) received.push(event);
  })();
  agent.stdout(READY);
  clock = 7_000;
  agent.send('spend');
  clock = 9_000;
  agent.stdout(RESULT_FAILED);
  agent.exit('agent: test');
  await reading;
  assert.deepEqual(asked, [['API Error: 529 overloaded', 7_000]]);
  const error = received.find((event) => event.type === 'error');
  assert.equal(error?.content, 'model budget reached: this run\'s max_budget_usd (0.01 USD) is spent');
  assert.equal(error?.turn_id, 'turn-1');
});
