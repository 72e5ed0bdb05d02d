// The web console's agent chat: how a send and the agent's events become the turns the page shows,
// whatever order they arrive in.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentEvent } from '@berth/client';
import { applyEvent, EMPTY_CHAT, notSent, sending, sent, type Chat, type Turn } from '../../packages/console/src/agents/chat.js';

const assistant = (...content: unknown[]) => JSON.stringify({ type: 'assistant', message: { role: 'assistant', content } });
const result = (text: string, isError = false) => JSON.stringify({ type: 'result', subtype: isError ? 'error' : 'success', is_error: isError, result: text });
const event = (type: AgentEvent['type'], turn_id?: string, content?: string): AgentEvent => ({ type, turn_id, content, at: '2030-01-01T00:00:00.000Z' });
const turns = (chat: Chat) => chat.items.filter((item): item is Turn => item.kind === 'turn');
const play = (chat: Chat, ...events: AgentEvent[]) => events.reduce(applyEvent, chat);

describe('the console\'s agent chat', () => {
  it('shows a sent prompt at once, then the answer streamed into the same turn until turn_end', () => {
    let chat = sending(EMPTY_CHAT, 'k1', 'say: hello');
    assert.deepEqual(turns(chat).map((t) => [t.prompt, t.status]), [['say: hello', 'sending']]);
    chat = sent(chat, 'k1', 'turn-1');
    chat = play(chat, event('turn_start', 'turn-1'), event('output', 'turn-1', JSON.stringify({ type: 'system', subtype: 'init' })));
    assert.equal(turns(chat)[0]!.status, 'running');
    chat = play(chat, event('output', 'turn-1', assistant({ type: 'text', text: 'hello' })), event('output', 'turn-1', result('hello')));
    assert.equal(turns(chat)[0]!.text, 'hello', 'the result line does not repeat the text');
    chat = play(chat, event('turn_end', 'turn-1'));
    assert.deepEqual(turns(chat).map((t) => [t.turnId, t.prompt, t.text, t.status]), [['turn-1', 'say: hello', 'hello', 'done']]);
  });

  it('keeps one turn when its events arrive before the send is answered', () => {
    let chat = sending(EMPTY_CHAT, 'k1', 'say: quick');
    chat = play(chat, event('turn_start', 'turn-1'), event('output', 'turn-1', assistant({ type: 'text', text: 'quick' })), event('turn_end', 'turn-1'));
    chat = sent(chat, 'k1', 'turn-1');
    assert.deepEqual(turns(chat).map((t) => [t.key, t.prompt, t.text, t.status]), [['k1', 'say: quick', 'quick', 'done']]);
  });

  it('shows turns it did not send (another tab, a spawn prompt) without a prompt', () => {
    const chat = play(EMPTY_CHAT, event('turn_start', 'turn-9'), event('output', 'turn-9', result('from elsewhere')), event('turn_end', 'turn-9'));
    assert.deepEqual(turns(chat).map((t) => [t.prompt, t.text, t.status]), [[undefined, 'from elsewhere', 'done']]);
  });

  it('writes tool calls into the answer and joins the assistant messages of a turn', () => {
    const chat = play(
      sent(sending(EMPTY_CHAT, 'k', 'run: ls'), 'k', 'turn-1'),
      event('output', 'turn-1', assistant({ type: 'tool_use', name: 'Bash', input: { command: 'ls' } })),
      event('output', 'turn-1', JSON.stringify({ type: 'user', message: { content: [{ type: 'tool_result', content: 'a.txt' }] } })),
      event('output', 'turn-1', assistant({ type: 'text', text: 'a.txt' })),
    );
    assert.equal(turns(chat)[0]!.text, '[tool call Bash] {"command":"ls"}\na.txt');
  });

  it('marks a failed turn and keeps the error text; ignores lines that are not JSON', () => {
    const chat = play(
      sent(sending(EMPTY_CHAT, 'k', 'fail: server'), 'k', 'turn-1'),
      event('output', 'turn-1', 'not json'),
      event('output', 'turn-1', result('API Error: 500', true)),
      event('error', 'turn-1', 'the turn failed'),
    );
    const [turn] = turns(chat);
    assert.equal(turn!.status, 'failed');
    assert.deepEqual(turn!.errors, ['API Error: 500', 'the turn failed']);
  });

  it('marks a refused send as failed with Berth\'s text', () => {
    const chat = notSent(sending(EMPTY_CHAT, 'k', 'hi'), 'k', 'agent agent-1 is generating a turn (HTTP 409)');
    assert.deepEqual(turns(chat).map((t) => [t.status, t.errors]), [['failed', ['agent agent-1 is generating a turn (HTTP 409)']]]);
  });

  it('notes errors outside a turn and the agent\'s exit, and remembers that the stream closed', () => {
    const chat = play(EMPTY_CHAT, event('error', undefined, 'warning on stderr'), event('exited', 'turn-1', 'agent: stopped by DELETE /agents/:id'), { type: 'closed' });
    assert.deepEqual(
      chat.items.map((item) => item.kind === 'note' && item.text),
      ['Error: warning on stderr', 'The agent exited: agent: stopped by DELETE /agents/:id'],
    );
    assert.equal(chat.closed, true);
  });
});
