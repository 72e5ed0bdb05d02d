// What the offline model answers to one Messages-API request: it reads the conversation the engine
// sends, finds the prompt and how far its plan has got (tool results already returned), and decides
// the next reply. Pure, so every behaviour is tested without sockets; the wire format is sse.ts's job.
import { createHash } from 'node:crypto';
import { parsePlan, type FailKind, type Plan, type Step } from './directives.js';

export interface ChatMessage {
  readonly role: string;
  readonly content: string | readonly Readonly<Record<string, unknown>>[];
}

/** The parts of a Messages-API request the model looks at. */
export interface MessagesRequest {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  readonly toolNames: readonly string[];
  readonly maxTokens: number;
  readonly stream: boolean;
}

export type ReplyBlock =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; readonly input: Readonly<Record<string, unknown>> };

export interface Usage {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_creation_input_tokens: 0;
  readonly cache_read_input_tokens: 0;
}

export type Reply =
  | {
      readonly kind: 'message';
      readonly id: string;
      readonly model: string;
      readonly content: readonly ReplyBlock[];
      readonly stopReason: 'end_turn' | 'tool_use';
      readonly usage: Usage;
      readonly slowMs: number | null;
      readonly sleepMs: number;
    }
  | {
      readonly kind: 'error';
      readonly status: number;
      readonly errorType: string;
      readonly message: string;
      readonly sleepMs: number;
    };

/** What the model knows of the conversation, read from the request's messages. */
export interface Conversation {
  /** The latest plain-text user turn, or null when there is none. */
  readonly prompt: string | null;
  /** Plain-text user turns before the prompt, oldest first. */
  readonly earlierPrompts: readonly string[];
  /** Text of the tool results that came back after the prompt, in order. */
  readonly toolResults: readonly string[];
  /** Tools fetched after the prompt with `ToolSearch select:<names>`. */
  readonly searchedTools: readonly string[];
}

export const BASH_TOOL = 'Bash';
export const STRUCTURED_OUTPUT_TOOL = 'StructuredOutput';
/** The engine's tool that fetches deferred tools (MCP tools) by name before they can be called. */
export const TOOL_SEARCH = 'ToolSearch';
export const SIDE_REPLY = 'offline model';
const RUN_DESCRIPTION = 'offline model run';
/** Text the engine itself puts in user turns: reminders, and the nudge sent when a --json-schema run ends without StructuredOutput. */
const ENGINE_TEXT_PREFIXES = ['<system-reminder>', '[structured-output-enforce]'];
/** Side requests (titles, quota probes) ask for few tokens and offer no tools; the main loop asks for many. */
const SIDE_REQUEST_MAX_TOKENS = 4096;

export type ParsedRequest = { readonly ok: true; readonly request: MessagesRequest } | { readonly ok: false; readonly message: string };

/** Checks the few fields the model relies on; everything else the engine sends is ignored. */
export function parseMessagesRequest(body: unknown): ParsedRequest {
  if (!isRecord(body)) return { ok: false, message: 'body must be a JSON object' };
  const { model, messages, tools, max_tokens: maxTokens, stream } = body;
  if (typeof model !== 'string' || model === '') return { ok: false, message: 'model: field required' };
  if (!Array.isArray(messages)) return { ok: false, message: 'messages: field required' };
  for (const [index, message] of messages.entries()) {
    if (!isRecord(message) || typeof message.role !== 'string') {
      return { ok: false, message: `messages.${index}: expected an object with a role` };
    }
    const content = message.content;
    if (typeof content !== 'string' && !(Array.isArray(content) && content.every(isRecord))) {
      return { ok: false, message: `messages.${index}.content: expected a string or a list of blocks` };
    }
  }
  if (tools !== undefined && !Array.isArray(tools)) return { ok: false, message: 'tools: expected a list' };
  const toolNames = (tools ?? []).flatMap((tool: unknown) => (isRecord(tool) && typeof tool.name === 'string' ? [tool.name] : []));
  return {
    ok: true,
    request: {
      model,
      messages: messages as ChatMessage[],
      toolNames,
      maxTokens: typeof maxTokens === 'number' ? maxTokens : 0,
      stream: stream === true,
    },
  };
}

export function respond(request: MessagesRequest): Reply {
  const conversation = readConversation(request.messages);
  if (conversation.prompt === null || isSideRequest(request)) return message(request, [text(SIDE_REPLY)], QUICK);

  const plan = parsePlan(conversation.prompt);
  if (plan.fail !== null) return { kind: 'error', ...FAILURES[plan.fail], sleepMs: plan.sleepMs };

  const offered = new Set(request.toolNames);
  const next = plan.steps.flatMap((step) => toolCallsOf(step, offered, conversation))[conversation.toolResults.length];
  if (next !== undefined) {
    const call: ReplyBlock = { type: 'tool_use', id: `toolu_offline_${digest(request.messages)}`, name: next.name, input: next.input };
    // Slowness is for the answer text only; the sleep applies to every reply of the prompt.
    return message(request, [call], { slowMs: null, sleepMs: plan.sleepMs, stopReason: 'tool_use' });
  }
  const answer = text(finalText(plan, conversation, offered));
  return message(request, [answer], { slowMs: plan.slowMs, sleepMs: plan.sleepMs, stopReason: 'end_turn' });
}

/** The answer once every tool call of the plan has come back: each step's text, in order. */
function finalText(plan: Plan, conversation: Conversation, offered: ReadonlySet<string>): string {
  let toolIndex = 0;
  const parts = plan.steps.flatMap((step): string[] => {
    const calls = toolCallsOf(step, offered, conversation);
    if (calls.length > 0) {
      return calls.flatMap((call) => {
        const output = conversation.toolResults[toolIndex++] ?? '';
        return call.answered ? [output] : [];
      });
    }
    switch (step.kind) {
      case 'say':
        return [step.text];
      case 'json':
        return [JSON.stringify(step.value)];
      case 'recall':
        return [conversation.earlierPrompts.length > 0 ? conversation.earlierPrompts.join('\n') : '(nothing to recall)'];
      case 'run':
        return [`offline model: cannot run \`${step.command}\`: the request offers no ${BASH_TOOL} tool`];
      case 'mcp':
        return [`offline model: cannot call \`${step.tool}\`: the request offers no such tool (MCP tools offered: ${[...offered].filter((name) => name.startsWith('mcp__')).join(', ') || 'none'})`];
      case 'invalid':
        return [`offline model: cannot read \`${step.line}\`: ${step.reason}`];
    }
  });
  const answer = parts.join('\n');
  // A plan made only of tool calls (a lone `json:`) still has to end with some text.
  return answer === '' ? 'done' : answer;
}

/** One tool call a step makes; `answered`: its result is part of the final answer. */
interface ToolCall {
  readonly name: string;
  readonly input: Readonly<Record<string, unknown>>;
  readonly answered: boolean;
}

/**
 * The tool calls of a step, none when the request does not offer its tool. The engine offers MCP tools
 * deferred (only ToolSearch and their names are sent): such a tool is first fetched with
 * `ToolSearch select:<name>`, as a model does, then called. Whether a tool was deferred is read from the
 * conversation once it has been fetched, so the calls of a step stay the same over the whole tool loop.
 */
function toolCallsOf(step: Step, offered: ReadonlySet<string>, conversation: Conversation): ToolCall[] {
  switch (step.kind) {
    case 'run':
      return offered.has(BASH_TOOL) ? [{ name: BASH_TOOL, input: { command: step.command, description: RUN_DESCRIPTION }, answered: true }] : [];
    case 'json':
      return offered.has(STRUCTURED_OUTPUT_TOOL) ? [{ name: STRUCTURED_OUTPUT_TOOL, input: step.value, answered: false }] : [];
    case 'mcp': {
      const call = { name: step.tool, input: step.input, answered: true };
      const deferred = conversation.searchedTools.includes(step.tool) || (!offered.has(step.tool) && offered.has(TOOL_SEARCH));
      if (deferred) return [{ name: TOOL_SEARCH, input: { query: `select:${step.tool}`, max_results: 1 }, answered: false }, call];
      return offered.has(step.tool) ? [call] : [];
    }
    default:
      return [];
  }
}

function isSideRequest(request: MessagesRequest): boolean {
  return request.toolNames.length === 0 && request.maxTokens > 0 && request.maxTokens <= SIDE_REQUEST_MAX_TOKENS;
}

const FAILURES: Record<FailKind, { status: number; errorType: string; message: string }> = {
  overloaded: { status: 529, errorType: 'overloaded_error', message: 'Overloaded (offline model fail: overloaded)' },
  server: { status: 500, errorType: 'api_error', message: 'Internal server error (offline model fail: server)' },
  auth: { status: 401, errorType: 'authentication_error', message: 'invalid x-api-key (offline model fail: auth)' },
};

/**
 * The prompt is the latest user turn with text of its own; turns carrying tool results are the
 * tool loop, and the text the engine adds itself (reminders, nudges) is not the user's words.
 */
export function readConversation(messages: readonly ChatMessage[]): Conversation {
  const prompts: string[] = [];
  let toolResults: string[] = [];
  let searchedTools: string[] = [];
  for (const message of messages) {
    if (message.role === 'assistant' && typeof message.content !== 'string') searchedTools.push(...selectedBySearch(message.content));
    if (message.role !== 'user') continue;
    const blocks = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    const results = blocks.filter((block) => block.type === 'tool_result');
    if (results.length > 0) {
      toolResults.push(...results.map((block) => contentText(block.content)));
      continue;
    }
    const words = blocks
      .filter((block) => block.type === 'text' && typeof block.text === 'string' && !isEngineText(block.text))
      .map((block) => (block.text as string).trim())
      .filter((words) => words !== '');
    if (words.length === 0) continue;
    prompts.push(words.join('\n'));
    toolResults = [];
    searchedTools = [];
  }
  const prompt = prompts.pop() ?? null;
  return { prompt, earlierPrompts: prompts, toolResults, searchedTools };
}

/** The tool names of the `ToolSearch select:a,b` calls among an assistant message's blocks. */
function selectedBySearch(blocks: readonly Readonly<Record<string, unknown>>[]): string[] {
  return blocks.flatMap((block) => {
    const query = block.type === 'tool_use' && block.name === TOOL_SEARCH && isRecord(block.input) ? block.input.query : undefined;
    return typeof query === 'string' && query.startsWith('select:') ? query.slice('select:'.length).split(',').map((name) => name.trim()) : [];
  });
}

function isEngineText(text: string): boolean {
  const start = text.trimStart();
  return ENGINE_TEXT_PREFIXES.some((prefix) => start.startsWith(prefix));
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((block): block is { text: string } => isRecord(block) && block.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text)
    .join('\n');
}

interface Pacing {
  readonly slowMs: number | null;
  readonly sleepMs: number;
  readonly stopReason: 'end_turn' | 'tool_use';
}

const QUICK: Pacing = { slowMs: null, sleepMs: 0, stopReason: 'end_turn' };

function message(request: MessagesRequest, content: readonly ReplyBlock[], pacing: Pacing): Reply {
  return {
    kind: 'message',
    id: `msg_offline_${digest(request.messages)}`,
    model: request.model,
    content,
    usage: usage(request, content),
    ...pacing,
  };
}

/** Deterministic token counts: a quarter of the characters, so costs are reproducible. */
export function usage(request: Pick<MessagesRequest, 'messages'>, content: readonly ReplyBlock[]): Usage {
  const replyChars = content.reduce((sum, block) => sum + (block.type === 'text' ? block.text.length : JSON.stringify(block.input).length), 0);
  return {
    input_tokens: countInputTokens(request.messages),
    output_tokens: Math.ceil(replyChars / 4),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
}

export function countInputTokens(messages: readonly ChatMessage[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

/** Ids must differ per reply (transcript readers de-duplicate by message id) yet repeat for the same request. */
function digest(messages: readonly ChatMessage[]): string {
  return createHash('sha256').update(JSON.stringify(messages)).digest('hex').slice(0, 24);
}

function text(value: string): ReplyBlock {
  return { type: 'text', text: value };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
