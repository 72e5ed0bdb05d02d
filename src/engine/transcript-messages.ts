// The conversation of a session as a caller reads it, built from the engine's transcript records.
//
// Kept: `user` and `assistant` records of the main conversation, in file order (the engine appends in
// conversation order, also across resumes). Each message's id is the engine's record `uuid`.
// Left out: every other record type (attachments, queue operations, api-request blobs, titles, costs),
// records marked `isMeta`, `isSidechain` (subagents), `isCompactSummary` or `isVisibleInTranscriptOnly`,
// user text that is an engine wrapper (`<command-name>…`, `<local-command-stdout>…`), `<system-reminder>`
// blocks, and thinking blocks.
//
// Rendering of content blocks (several blocks of one record are joined with a newline):
//   text         → the text as recorded
//   tool_use     → `[tool call <name>] <input as compact JSON>`
//   tool_result  → `[tool result] <text>`, or `[tool error] <text>` when is_error is set
//   image        → `[image]`, document → `[document]`
// Tool results are user-role records in the engine's transcript and keep role `user` here.
// The engine writes one assistant record per content block, all with the same `message.id`; consecutive
// records of one assistant message are merged into one message whose id is the first record's uuid.
import type { TranscriptRecord } from './transcript.js';

export type MessageRole = 'user' | 'assistant';

export interface TranscriptMessage {
  readonly id: string;
  readonly role: MessageRole;
  readonly content: string;
}

const ENGINE_WRAPPER = /^\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|local-command-caveat)>/;
const SYSTEM_REMINDER = /<system-reminder>[\s\S]*?<\/system-reminder>/g;
const HIDDEN_FLAGS = ['isMeta', 'isSidechain', 'isCompactSummary', 'isVisibleInTranscriptOnly'] as const;

type Block = Record<string, unknown>;

export function transcriptMessages(records: readonly TranscriptRecord[]): TranscriptMessage[] {
  const messages: { id: string; role: MessageRole; parts: string[]; assistantMessageId: string | undefined }[] = [];
  const seen = new Set<string>();
  for (const record of records) {
    if (record.type !== 'user' && record.type !== 'assistant') continue;
    if (HIDDEN_FLAGS.some((flag) => record[flag] === true)) continue;
    const uuid = record.uuid;
    const message = asObject(record.message);
    if (typeof uuid !== 'string' || !message || seen.has(uuid)) continue;
    seen.add(uuid);
    const role: MessageRole = record.type;
    const parts = renderContent(message.content, role);
    if (parts.length === 0) continue;

    const assistantMessageId = role === 'assistant' && typeof message.id === 'string' ? message.id : undefined;
    const last = messages.at(-1);
    if (assistantMessageId !== undefined && last?.role === 'assistant' && last.assistantMessageId === assistantMessageId) {
      last.parts.push(...parts);
    } else {
      messages.push({ id: uuid, role, parts, assistantMessageId });
    }
  }
  return messages.map(({ id, role, parts }) => ({ id, role, content: parts.join('\n') }));
}

function renderContent(content: unknown, role: MessageRole): string[] {
  if (typeof content === 'string') {
    if (role === 'user' && ENGINE_WRAPPER.test(content)) return [];
    const text = withoutReminders(content);
    return text === undefined ? [] : [text];
  }
  if (!Array.isArray(content)) return [];
  return content.flatMap((block: unknown) => {
    const rendered = renderBlock(asObject(block));
    return rendered === undefined ? [] : [rendered];
  });
}

function renderBlock(block: Block | undefined): string | undefined {
  if (!block) return undefined;
  switch (block.type) {
    case 'text': {
      if (typeof block.text !== 'string' || ENGINE_WRAPPER.test(block.text)) return undefined;
      return withoutReminders(block.text);
    }
    case 'tool_use':
    case 'server_tool_use':
      return `[tool call ${typeof block.name === 'string' ? block.name : 'unknown'}] ${JSON.stringify(block.input ?? {})}`;
    case 'tool_result':
      return `${block.is_error === true ? '[tool error]' : '[tool result]'} ${toolResultText(block.content)}`;
    case 'image':
      return '[image]';
    case 'document':
      return '[document]';
    default:
      return undefined;
  }
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return withoutReminders(content) ?? '';
  if (!Array.isArray(content)) return '';
  return content
    .flatMap((item: unknown) => {
      const block = asObject(item);
      if (block?.type === 'text' && typeof block.text === 'string') return [withoutReminders(block.text) ?? ''];
      if (block?.type === 'image') return ['[image]'];
      return [];
    })
    .join('\n');
}

/** The text without `<system-reminder>` blocks; undefined when nothing else is left. */
function withoutReminders(text: string): string | undefined {
  if (!text.includes('<system-reminder>')) return text.trim() === '' ? undefined : text;
  const rest = text.replace(SYSTEM_REMINDER, '').trim();
  return rest === '' ? undefined : rest;
}

function asObject(value: unknown): Block | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Block) : undefined;
}
