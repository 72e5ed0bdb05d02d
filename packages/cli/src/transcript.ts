// Conversations as people read them in a terminal: who said what, tool calls and their results set apart
// and long results shortened. Used for a session's stored messages (`sessions show`) and for the engine's
// live stream-json lines of an agent (`agents chat`). Everything in them is shown through terminal-text.ts.
import { styled, type Sink } from './output.js';
import { visible } from './terminal-text.js';

const RESULT_LINES = 12;

/** A stored message (`[tool call …]`, `[tool result] …` and `[tool error] …` parts, joined by newlines). */
export interface StoredMessage {
  readonly role: string;
  readonly content: string;
}

type Part = { kind: 'text' | 'call' | 'result' | 'error'; lines: string[] };

const MARKERS = [
  ['[tool call ', 'call'],
  ['[tool result] ', 'result'],
  ['[tool error] ', 'error'],
] as const;

/** Splits a stored message's content into its parts: each marker starts a part, other lines continue one. */
export function messageParts(content: string): Part[] {
  const parts: Part[] = [];
  for (const line of content.split('\n')) {
    const marker = MARKERS.find(([prefix]) => line.startsWith(prefix));
    const last = parts.at(-1);
    if (marker !== undefined) {
      const rest = line.slice(marker[0].length);
      // `[tool call Bash] {"command":"ls"}` is shown as `Bash {"command":"ls"}`.
      parts.push({ kind: marker[1], lines: [marker[1] === 'call' ? rest.replace('] ', ' ') : rest] });
    } else if (last !== undefined && last.kind !== 'call') {
      last.lines.push(line);
    } else {
      // A tool call's input is one line of compact JSON: what follows it is text again.
      parts.push({ kind: 'text', lines: [line] });
    }
  }
  return parts;
}

/** Prints a session's messages one by one; a speaker's name is printed when the speaker changes. */
export class TranscriptPrinter {
  private speaker: string | undefined;

  constructor(private readonly out: Sink) {}

  message(message: StoredMessage): void {
    const parts = messageParts(message.content);
    // Tool results are user-role records in the engine's transcript, but it is the tools that speak there.
    const onlyResults = parts.every((part) => part.kind === 'result' || part.kind === 'error');
    const speaker = message.role === 'user' && !onlyResults ? 'user' : 'assistant';
    if (speaker !== this.speaker) {
      this.out.write(`${this.speaker === undefined ? '' : '\n'}${styled(this.out, speaker === 'user' ? 'green' : 'cyan', `${speaker}:`)}\n`);
      this.speaker = speaker;
    }
    for (const part of parts) {
      if (part.kind === 'text') this.out.write(indent(part.lines));
      else if (part.kind === 'call') this.out.write(indent([toolCall(this.out, part.lines.join('\n'))]));
      else this.out.write(indent(toolResult(this.out, part.lines.join('\n'), part.kind === 'error')));
    }
  }
}

/** What an agent's engine said in one stream-json line, as terminal text (empty for bookkeeping lines). */
export function renderEngineLine(out: Sink, line: string): string {
  let event: Record<string, any>;
  try {
    event = JSON.parse(line) as Record<string, any>;
  } catch {
    return `${visible(line)}\n`;
  }
  if (event.type === 'berth_truncated') return `${styled(out, 'yellow', `(an engine line of ${event.bytes} bytes was too long to show)`)}\n`;
  const blocks: unknown = event.message?.content;
  if ((event.type !== 'assistant' && event.type !== 'user') || !Array.isArray(blocks)) return '';
  return blocks
    .map((block: Record<string, any>) => {
      if (block.type === 'text' && event.type === 'assistant') return `${visible(String(block.text))}\n`;
      if (block.type === 'tool_use') return `${toolCall(out, `${block.name} ${JSON.stringify(block.input ?? {})}`)}\n`;
      if (block.type === 'tool_result') return toolResult(out, resultText(block.content), block.is_error === true).map((l) => `${l}\n`).join('');
      return '';
    })
    .join('');
}

function toolCall(out: Sink, nameAndInput: string): string {
  return styled(out, 'dim', `⚙ ${nameAndInput}`);
}

/** A tool's result, its first lines only: the whole of it is in the session's messages. */
function toolResult(out: Sink, text: string, isError: boolean): string[] {
  const lines = text.split('\n');
  const shown = lines.slice(0, RESULT_LINES).map((line, i) => `${i === 0 ? '↳ ' : '  '}${line}`);
  if (lines.length > RESULT_LINES) shown.push(`  … ${lines.length - RESULT_LINES} more lines`);
  return shown.map((line) => styled(out, isError ? 'red' : 'dim', line));
}

function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((item: Record<string, any>) => (item.type === 'text' ? String(item.text) : `[${item.type}]`)).join('\n');
}

function indent(lines: readonly string[]): string {
  return lines.map((line) => `  ${visible(line)}\n`).join('');
}
