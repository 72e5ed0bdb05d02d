// The directive language of the offline model: a prompt's lines such as `say: hi` or `run: ls`
// become a plan. Parsing is pure so the contract the README documents is tested line by line here,
// apart from how the plan is played out over a conversation (responder.ts).

export type FailKind = 'overloaded' | 'server' | 'auth';

/** One thing the answer is made of, in prompt order. */
export type Step =
  | { readonly kind: 'say'; readonly text: string }
  | { readonly kind: 'run'; readonly command: string }
  | { readonly kind: 'json'; readonly value: Readonly<Record<string, unknown>> }
  | { readonly kind: 'recall' }
  /** A call of a tool by its name as the request offers it, e.g. an MCP server's `mcp__berth__list_sessions`. */
  | { readonly kind: 'mcp'; readonly tool: string; readonly input: Readonly<Record<string, unknown>> }
  /** A directive line that could not be read; the answer explains it instead of failing silently. */
  | { readonly kind: 'invalid'; readonly line: string; readonly reason: string };

export interface Plan {
  /** Never empty: a prompt without content directives becomes one `say` echoing the prompt. */
  readonly steps: readonly Step[];
  /** Delay between the text chunks of the answer; null streams the text in one chunk. */
  readonly slowMs: number | null;
  /** Delay before each reply to this prompt. */
  readonly sleepMs: number;
  readonly fail: FailKind | null;
}

/** Caps `slow:` and `sleep:` so a typo cannot hold a test (or an engine) for hours. */
export const MAX_DELAY_MS = 60_000;

const DIRECTIVE = /^\s*(say|run|json|recall|mcp|slow|fail|sleep):(.*)$/;
/** `mcp: <tool name> [<JSON object>]`: the name as the engine offers the tool (MCP tools are `mcp__<server>__<tool>`). */
const MCP_CALL = /^(\S+)(?:\s+(.*))?$/s;
const FAIL_KINDS: readonly FailKind[] = ['overloaded', 'server', 'auth'];

export function parsePlan(prompt: string): Plan {
  const lines = prompt.split(/\r?\n/);
  const steps: Step[] = [];
  let slowMs: number | null = null;
  let sleepMs = 0;
  let fail: FailKind | null = null;
  let sawDirective = false;

  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const match = DIRECTIVE.exec(line);
    if (!match) continue;
    sawDirective = true;
    const name = match[1]!;
    const argument = match[2]!.trim();
    switch (name) {
      case 'say':
        steps.push({ kind: 'say', text: argument });
        break;
      case 'run':
        steps.push(argument === '' ? invalid(line, 'no command given') : { kind: 'run', command: argument });
        break;
      case 'recall':
        steps.push({ kind: 'recall' });
        break;
      case 'mcp': {
        const call = MCP_CALL.exec(argument);
        if (!call) {
          steps.push(invalid(line, 'no tool named'));
          break;
        }
        const read = call[2] === undefined ? { value: {}, extraLines: 0 } : readJsonObject(call[2], lines.slice(index + 1));
        if ('reason' in read) {
          steps.push(invalid(line, read.reason));
        } else {
          steps.push({ kind: 'mcp', tool: call[1]!, input: read.value });
          index += read.extraLines;
        }
        break;
      }
      case 'json': {
        const read = readJsonObject(argument, lines.slice(index + 1));
        if ('reason' in read) {
          steps.push(invalid(line, read.reason));
        } else {
          steps.push({ kind: 'json', value: read.value });
          index += read.extraLines;
        }
        break;
      }
      case 'slow':
      case 'sleep': {
        const ms = readDelay(argument);
        if (ms === undefined) steps.push(invalid(line, 'expected a number of milliseconds'));
        else if (name === 'slow') slowMs = ms;
        else sleepMs = ms;
        break;
      }
      case 'fail': {
        const kind = FAIL_KINDS.find((candidate) => candidate === argument);
        if (kind === undefined) steps.push(invalid(line, `expected one of ${FAIL_KINDS.join(', ')}`));
        else fail ??= kind;
        break;
      }
    }
  }

  // Modifier-only prompts (`slow: 200` above free text) still need something to say.
  if (steps.length === 0) steps.push({ kind: 'say', text: echo(prompt) });
  return { steps, slowMs, sleepMs, fail };
}

/** The answer to a prompt that carries no directive at all. */
export function echo(prompt: string): string {
  return `offline model: ${prompt.trim()}`;
}

function invalid(line: string, reason: string): Step {
  return { kind: 'invalid', line: line.trim(), reason };
}

function readDelay(text: string): number | undefined {
  if (!/^\d{1,12}$/.test(text)) return undefined;
  return Math.min(Number(text), MAX_DELAY_MS);
}

type JsonRead = { value: Record<string, unknown>; extraLines: number } | { reason: string };

/**
 * A `json:` object may be pretty-printed over several lines, so following lines are taken in
 * one at a time until the text parses; if it never does, only the directive line is consumed.
 */
function readJsonObject(first: string, following: readonly string[]): JsonRead {
  let text = first;
  let firstError = '';
  for (let extraLines = 0; extraLines <= following.length; extraLines++) {
    if (extraLines > 0) text += `\n${following[extraLines - 1]!}`;
    try {
      const value: unknown = JSON.parse(text);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        return { reason: 'expected a JSON object' };
      }
      return { value: value as Record<string, unknown>, extraLines };
    } catch (error) {
      if (extraLines === 0) firstError = error instanceof Error ? error.message : String(error);
    }
  }
  return { reason: `not valid JSON (${firstError})` };
}
