// An agent's chat as the page shows it, built from what the user sent and the agent's events. Pure
// functions from one state to the next, so the order in which a send's answer and the turn's first
// events arrive does not matter.
//
// Each `output` event is one line the engine printed in stream-json: `assistant` lines carry the answer's
// text and tool calls, the `result` line ends the turn (its text is used when no assistant text came).
import type { AgentEvent } from '@berth/client';

export interface Turn {
  readonly kind: 'turn';
  /** The console's own key for a turn, stable from the moment it is sent. */
  readonly key: string;
  readonly turnId?: string;
  readonly prompt?: string;
  readonly text: string;
  readonly status: 'sending' | 'running' | 'done' | 'failed';
  readonly errors: readonly string[];
}

export interface Note {
  readonly kind: 'note';
  readonly key: string;
  readonly text: string;
}

export type ChatItem = Turn | Note;

export interface Chat {
  readonly items: readonly ChatItem[];
  /** True once the stream said `closed`. */
  readonly closed: boolean;
}

export const EMPTY_CHAT: Chat = { items: [], closed: false };

let keys = 0;
const nextKey = (prefix: string) => `${prefix}-${++keys}`;

/** A prompt the user sent, before Berth has answered with its turn id. */
export function sending(chat: Chat, key: string, prompt: string): Chat {
  return { ...chat, items: [...chat.items, { kind: 'turn', key, prompt, text: '', status: 'sending', errors: [] }] };
}

/** Berth accepted the send: the turn has an id (its events may already have arrived). */
export function sent(chat: Chat, key: string, turnId: string): Chat {
  const early = chat.items.find((item): item is Turn => item.kind === 'turn' && item.turnId === turnId && item.key !== key);
  const items = chat.items
    .filter((item) => item !== early)
    .map((item) =>
      item.kind === 'turn' && item.key === key
        ? { ...(early ?? item), key, prompt: item.prompt, turnId, status: early?.status ?? ('running' as const) }
        : item,
    );
  return { ...chat, items };
}

/** Berth refused the send. */
export function notSent(chat: Chat, key: string, error: string): Chat {
  return updateTurn(chat, (turn) => turn.key === key, (turn) => ({ ...turn, status: 'failed', errors: [...turn.errors, error] }));
}

export function applyEvent(chat: Chat, event: AgentEvent): Chat {
  switch (event.type) {
    case 'turn_start':
      return withTurn(chat, event.turn_id, (turn) => turn);
    case 'output':
      return withTurn(chat, event.turn_id, (turn) => readOutputLine(turn, event.content ?? ''));
    case 'turn_end':
      return withTurn(chat, event.turn_id, (turn) => ({ ...turn, status: 'done' }));
    case 'error':
      if (event.turn_id === undefined) return note(chat, `Error: ${event.content ?? ''}`);
      return withTurn(chat, event.turn_id, (turn) => ({
        ...turn,
        status: turn.status === 'done' ? 'done' : 'failed',
        errors: [...turn.errors, event.content ?? ''],
      }));
    case 'exited':
      return note(chat, `The agent exited: ${event.content ?? 'no reason given'}`);
    case 'closed':
      return { ...chat, closed: true };
    default:
      return chat;
  }
}

/** Text of one stream-json line of the engine, added to its turn. */
export function readOutputLine(turn: Turn, line: string): Turn {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return turn;
  }
  if (typeof record !== 'object' || record === null) return turn;
  const { type } = record as { type?: unknown };
  if (type === 'assistant') {
    const content = (record as { message?: { content?: unknown } }).message?.content;
    const parts = Array.isArray(content) ? content.map(describeBlock).filter((part) => part !== '') : [];
    return parts.length === 0 ? turn : { ...turn, text: [turn.text, ...parts].filter((part) => part !== '').join('\n') };
  }
  if (type === 'result') {
    const { result, is_error: isError } = record as { result?: unknown; is_error?: unknown };
    if (isError === true) return { ...turn, errors: [...turn.errors, typeof result === 'string' ? result : 'the turn failed'] };
    if (turn.text === '' && typeof result === 'string') return { ...turn, text: result };
  }
  return turn;
}

function describeBlock(block: unknown): string {
  if (typeof block !== 'object' || block === null) return '';
  const { type, text, name, input } = block as { type?: unknown; text?: unknown; name?: unknown; input?: unknown };
  if (type === 'text' && typeof text === 'string') return text;
  if (type === 'tool_use' && typeof name === 'string') return `[tool call ${name}] ${JSON.stringify(input ?? {})}`;
  return '';
}

function withTurn(chat: Chat, turnId: string | undefined, change: (turn: Turn) => Turn): Chat {
  if (turnId === undefined) return chat;
  const known = chat.items.some((item) => item.kind === 'turn' && item.turnId === turnId);
  const base: Chat = known
    ? chat
    : // A turn this page did not send (another tab, the spawn's first prompt), or whose send has not been answered yet.
      { ...chat, items: [...chat.items, { kind: 'turn', key: nextKey('turn'), turnId, text: '', status: 'running', errors: [] }] };
  return updateTurn(base, (turn) => turn.turnId === turnId, change);
}

function updateTurn(chat: Chat, which: (turn: Turn) => boolean, change: (turn: Turn) => Turn): Chat {
  return { ...chat, items: chat.items.map((item) => (item.kind === 'turn' && which(item) ? change(item) : item)) };
}

function note(chat: Chat, text: string): Chat {
  return { ...chat, items: [...chat.items, { kind: 'note', key: nextKey('note'), text }] };
}
