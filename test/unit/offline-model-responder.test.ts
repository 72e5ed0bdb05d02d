import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseMessagesRequest,
  readConversation,
  respond,
  type ChatMessage,
  type MessagesRequest,
  type Reply,
} from '../../src/offline-model/responder.js';

const ENGINE_TOOLS = ['Agent', 'Bash', 'Edit', 'Read', 'Write'];
const REMINDER = { type: 'text', text: '<system-reminder>\nAttribution for git commits...\n</system-reminder>\n' };

/** A user turn shaped as the engine sends the first one: a reminder block, then the prompt. */
function prompt(text: string): ChatMessage {
  return { role: 'user', content: [REMINDER, { type: 'text', text: `${text}\n` }] };
}

function toolUse(reply: Reply): { id: string; name: string; input: Record<string, unknown> } {
  assert.equal(reply.kind, 'message');
  const block = reply.content[0];
  assert.equal(block?.type, 'tool_use');
  return block as { id: string; name: string; input: Record<string, unknown> };
}

function answer(reply: Reply): string {
  assert.equal(reply.kind, 'message');
  assert.equal(reply.stopReason, 'end_turn');
  assert.equal(reply.content.length, 1);
  const block = reply.content[0]!;
  assert.equal(block.type, 'text');
  return block.text;
}

function request(messages: ChatMessage[], overrides: Partial<MessagesRequest> = {}): MessagesRequest {
  return { model: 'claude-opus-5-5', messages, toolNames: ENGINE_TOOLS, maxTokens: 128000, stream: true, ...overrides };
}

/** Plays the engine's side of the tool loop: appends the call and its result, as the engine would. */
function afterTool(messages: ChatMessage[], reply: Reply, output: string): ChatMessage[] {
  const call = toolUse(reply);
  return [
    ...messages,
    { role: 'assistant', content: [{ type: 'tool_use', ...call }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: output, is_error: false }] },
  ];
}

test('a plain prompt is echoed and the request model is echoed back', () => {
  const reply = respond(request([prompt('hello there')], { model: 'some-model' }));
  assert.equal(answer(reply), 'offline model: hello there');
  assert.equal(reply.kind === 'message' && reply.model, 'some-model');
});

test('the prompt may be a plain string and system-role messages after it are ignored', () => {
  const messages: ChatMessage[] = [
    { role: 'user', content: 'say: plain' },
    { role: 'system', content: '# Environment' },
  ];
  assert.equal(answer(respond(request(messages))), 'plain');
});

test('several say: lines answer with their texts joined by newlines', () => {
  assert.equal(answer(respond(request([prompt('say: one\nsay: two')]))), 'one\ntwo');
});

test('run: calls Bash with the command, then answers with its output', () => {
  const first = [prompt('run: echo hi')];
  const call = respond(request(first));
  assert.equal(call.kind === 'message' && call.stopReason, 'tool_use');
  assert.deepEqual(toolUse(call), {
    type: 'tool_use',
    id: toolUse(call).id,
    name: 'Bash',
    input: { command: 'echo hi', description: 'offline model run' },
  });
  assert.equal(answer(respond(request(afterTool(first, call, 'hi')))), 'hi');
});

test('several run: lines call Bash one per request and the answer joins the outputs with the says in order', () => {
  let messages = [prompt('run: echo a\nsay: middle\nrun: echo b')];
  const first = respond(request(messages));
  assert.equal(toolUse(first).input.command, 'echo a');
  messages = afterTool(messages, first, 'a');
  const second = respond(request(messages));
  assert.equal(toolUse(second).input.command, 'echo b');
  assert.notEqual(toolUse(second).id, toolUse(first).id);
  messages = afterTool(messages, second, 'b');
  assert.equal(answer(respond(request(messages))), 'a\nmiddle\nb');
});

test('tool ids and message ids are the same for the same request', () => {
  const messages = [prompt('run: echo hi')];
  assert.deepEqual(respond(request(messages)), respond(request(messages)));
});

test('a tool result given as a list of text blocks is read as text', () => {
  const messages = [prompt('run: ls')];
  const call = toolUse(respond(request(messages)));
  const result: ChatMessage = {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: call.id, content: [{ type: 'text', text: 'x' }, { type: 'text', text: 'y' }] }],
  };
  const next = [...messages, { role: 'assistant', content: [{ type: 'tool_use', ...call }] }, result];
  assert.equal(answer(respond(request(next))), 'x\ny');
});

test('tool results of earlier prompts do not count as progress on the latest one', () => {
  let messages = [prompt('run: echo old')];
  messages = afterTool(messages, respond(request(messages)), 'old');
  messages = [...messages, { role: 'assistant', content: [{ type: 'text', text: 'old' }] }, prompt('run: echo new')];
  assert.equal(toolUse(respond(request(messages))).input.command, 'echo new');
});

test('run: without a Bash tool on offer explains instead of calling it', () => {
  const reply = respond(request([prompt('run: ls')], { toolNames: ['Read'] }));
  assert.equal(answer(reply), 'offline model: cannot run `ls`: the request offers no Bash tool');
});

test('json: calls StructuredOutput when it is offered, then ends with done', () => {
  const messages = [prompt('json: {"a": 1}')];
  const call = respond(request(messages, { toolNames: [...ENGINE_TOOLS, 'StructuredOutput'] }));
  assert.deepEqual({ name: toolUse(call).name, input: toolUse(call).input }, { name: 'StructuredOutput', input: { a: 1 } });
  const done = respond(request(afterTool(messages, call, 'Structured output provided successfully'), { toolNames: [...ENGINE_TOOLS, 'StructuredOutput'] }));
  assert.equal(answer(done), 'done');
});

test('json: without StructuredOutput answers with the JSON text', () => {
  assert.equal(answer(respond(request([prompt('json: { "a": [1, 2] }')]))), '{"a":[1,2]}');
});

test('recall: lists the earlier plain-text prompts only', () => {
  let messages: ChatMessage[] = [prompt('first')];
  messages.push({ role: 'assistant', content: [{ type: 'text', text: 'offline model: first' }] });
  messages.push(prompt('run: echo x'));
  messages = afterTool(messages, respond(request(messages)), 'x');
  messages.push({ role: 'assistant', content: [{ type: 'text', text: 'x' }] });
  messages.push({ role: 'user', content: '[structured-output-enforce] You MUST call the StructuredOutput tool to complete this request.' });
  messages.push({ role: 'user', content: [{ type: 'text', text: '<system-reminder>noise</system-reminder>' }] });
  messages.push(prompt('recall:'));
  assert.equal(answer(respond(request(messages))), 'first\nrun: echo x');
});

test('recall: with nothing earlier says so', () => {
  assert.equal(answer(respond(request([prompt('recall:')]))), '(nothing to recall)');
});

test('the engine nudge to call StructuredOutput is not taken as a new prompt', () => {
  const messages: ChatMessage[] = [
    prompt('say: hi'),
    { role: 'assistant', content: [{ type: 'text', text: 'hi' }] },
    { role: 'user', content: [{ type: 'text', text: '[structured-output-enforce] You MUST call the StructuredOutput tool.' }] },
  ];
  assert.deepEqual(readConversation(messages), { prompt: 'say: hi', earlierPrompts: [], toolResults: [], searchedTools: [] });
});

test('an unreadable directive is explained in the answer', () => {
  assert.equal(answer(respond(request([prompt('say: a\nslow: soon')]))), 'a\noffline model: cannot read `slow: soon`: expected a number of milliseconds');
});

test('fail: answers with the matching Anthropic error', () => {
  const cases = [
    ['overloaded', 529, 'overloaded_error'],
    ['server', 500, 'api_error'],
    ['auth', 401, 'authentication_error'],
  ] as const;
  for (const [kind, status, errorType] of cases) {
    const reply = respond(request([prompt(`fail: ${kind}`)]));
    assert.equal(reply.kind, 'error');
    assert.deepEqual(reply.kind === 'error' && [reply.status, reply.errorType], [status, errorType]);
  }
});

test('slow: paces the answer text but not tool calls; sleep: delays every reply', () => {
  const messages = [prompt('slow: 30\nsleep: 20\nrun: echo x')];
  const call = respond(request(messages));
  assert.deepEqual(call.kind === 'message' && [call.slowMs, call.sleepMs], [null, 20]);
  const final = respond(request(afterTool(messages, call, 'x')));
  assert.deepEqual(final.kind === 'message' && [final.slowMs, final.sleepMs], [30, 20]);
});

test('a side request without tools and with few tokens gets a short quick text whatever the prompt', () => {
  const reply = respond(request([prompt('fail: overloaded\nsleep: 5000')], { toolNames: [], maxTokens: 512 }));
  assert.equal(answer(reply), 'offline model');
  assert.equal(reply.kind === 'message' && reply.sleepMs, 0);
});

test('usage is a quarter of the characters of the messages and of the reply, rounded up', () => {
  const messages = [prompt('say: hello')];
  const reply = respond(request(messages));
  assert.deepEqual(reply.kind === 'message' && reply.usage, {
    input_tokens: Math.ceil(JSON.stringify(messages).length / 4),
    output_tokens: 2,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  });
});

test('the usage of a tool call counts the characters of its input', () => {
  const reply = respond(request([prompt('run: ls')]));
  const input = JSON.stringify({ command: 'ls', description: 'offline model run' });
  assert.equal(reply.kind === 'message' && reply.usage.output_tokens, Math.ceil(input.length / 4));
});

test('parseMessagesRequest keeps the fields the model uses', () => {
  const parsed = parseMessagesRequest({
    model: 'm',
    max_tokens: 100,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
    tools: [{ name: 'Bash', input_schema: {} }, { name: 'Read' }],
    system: [{ type: 'text', text: 'ignored' }],
  });
  assert.deepEqual(parsed, {
    ok: true,
    request: { model: 'm', maxTokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }], toolNames: ['Bash', 'Read'] },
  });
});

test('parseMessagesRequest refuses bodies without a model or messages', () => {
  assert.equal(parseMessagesRequest({ messages: [] }).ok, false);
  assert.equal(parseMessagesRequest({ model: 'm' }).ok, false);
  assert.equal(parseMessagesRequest({ model: 'm', messages: [{ role: 'user', content: 5 }] }).ok, false);
  assert.equal(parseMessagesRequest([]).ok, false);
});

test('mcp: calls the named tool when the request offers it, then answers with its result', () => {
  const first = [prompt('mcp: mcp__berth__list_sessions {"limit": 1}\nsay: listed')];
  const offered = { toolNames: [...ENGINE_TOOLS, 'mcp__berth__list_sessions'] };
  const call = respond(request(first, offered));
  assert.equal(call.kind === 'message' && call.stopReason, 'tool_use');
  assert.deepEqual(toolUse(call), { type: 'tool_use', id: toolUse(call).id, name: 'mcp__berth__list_sessions', input: { limit: 1 } });
  assert.equal(answer(respond(request(afterTool(first, call, '{"sessions": []}'), offered))), '{"sessions": []}\nlisted');
});

test('mcp: naming a tool the request does not offer explains, listing the MCP tools offered', () => {
  const reply = respond(request([prompt('mcp: mcp__berth__nope')], { toolNames: [...ENGINE_TOOLS, 'mcp__berth__run_prompt'] }));
  assert.equal(answer(reply), 'offline model: cannot call `mcp__berth__nope`: the request offers no such tool (MCP tools offered: mcp__berth__run_prompt)');
});

test('mcp: fetches a deferred tool with ToolSearch first, then calls it and answers with its result', () => {
  const first = [prompt('mcp: mcp__berth__list_sessions\nsay: listed')];
  const deferred = { toolNames: [...ENGINE_TOOLS, 'ToolSearch'] };
  const search = respond(request(first, deferred));
  assert.deepEqual(toolUse(search), { type: 'tool_use', id: toolUse(search).id, name: 'ToolSearch', input: { query: 'select:mcp__berth__list_sessions', max_results: 1 } });
  // The engine offers the fetched tool from then on.
  const fetched = { toolNames: [...ENGINE_TOOLS, 'ToolSearch', 'mcp__berth__list_sessions'] };
  const second = afterTool(first, search, '<functions><function>{"name": "mcp__berth__list_sessions"}</function></functions>');
  const call = respond(request(second, fetched));
  assert.deepEqual(toolUse(call), { type: 'tool_use', id: toolUse(call).id, name: 'mcp__berth__list_sessions', input: {} });
  assert.equal(answer(respond(request(afterTool(second, call, '{"sessions": []}'), fetched))), '{"sessions": []}\nlisted');
});
