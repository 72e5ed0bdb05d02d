// Reads the engine's `--output-format stream-json --verbose --include-partial-messages` output: one JSON
// object per line. Berth keeps the raw lines (partial output for crash reports, stream-json callers),
// the text as it streams (SSE), and the final `result` line (the run's answer).
import { StringDecoder } from 'node:string_decoder';

export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface ResultEnvelope {
  readonly subtype: string;
  readonly isError: boolean;
  readonly result: string;
  readonly sessionId: string | undefined;
  readonly totalCostUsd: number | undefined;
  readonly usage: TokenUsage | undefined;
  readonly structuredOutput: unknown;
  readonly apiErrorStatus: number | undefined;
  readonly model: string | undefined;
}

export type EngineEvent =
  | { readonly kind: 'init'; readonly sessionId: string; readonly model: string | undefined }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'result'; readonly envelope: ResultEnvelope }
  | { readonly kind: 'other' };

type Json = Record<string, unknown>;

function asObject(value: unknown): Json | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

export function toTokenUsage(value: unknown): TokenUsage | undefined {
  const usage = asObject(value);
  if (!usage) return undefined;
  return {
    input_tokens: num(usage.input_tokens),
    output_tokens: num(usage.output_tokens),
    cache_creation_input_tokens: num(usage.cache_creation_input_tokens),
    cache_read_input_tokens: num(usage.cache_read_input_tokens),
  };
}

function firstModel(modelUsage: unknown): string | undefined {
  const models = asObject(modelUsage);
  return models ? Object.keys(models)[0] : undefined;
}

export function parseEngineLine(line: string): EngineEvent {
  let parsed: Json | undefined;
  try {
    parsed = asObject(JSON.parse(line));
  } catch {
    return { kind: 'other' };
  }
  if (!parsed) return { kind: 'other' };
  if (parsed.type === 'system' && parsed.subtype === 'init' && typeof parsed.session_id === 'string') {
    return { kind: 'init', sessionId: parsed.session_id, model: typeof parsed.model === 'string' ? parsed.model : undefined };
  }
  if (parsed.type === 'stream_event' && parsed.parent_tool_use_id == null) {
    const event = asObject(parsed.event);
    const delta = asObject(event?.delta);
    if (event?.type === 'content_block_delta' && delta?.type === 'text_delta' && typeof delta.text === 'string') {
      return { kind: 'text', text: delta.text };
    }
  }
  if (parsed.type === 'result') {
    return {
      kind: 'result',
      envelope: {
        subtype: typeof parsed.subtype === 'string' ? parsed.subtype : 'unknown',
        isError: parsed.is_error === true,
        result: typeof parsed.result === 'string' ? parsed.result : '',
        sessionId: typeof parsed.session_id === 'string' ? parsed.session_id : undefined,
        totalCostUsd: typeof parsed.total_cost_usd === 'number' ? parsed.total_cost_usd : undefined,
        usage: toTokenUsage(parsed.usage),
        structuredOutput: parsed.structured_output,
        apiErrorStatus: typeof parsed.api_error_status === 'number' ? parsed.api_error_status : undefined,
        model: firstModel(parsed.modelUsage),
      },
    };
  }
  return { kind: 'other' };
}

/**
 * Splits a byte stream into lines, keeping an unfinished last line until more arrives. Bytes are decoded
 * across chunk boundaries, and a line longer than maxLineChars is dropped whole (output of a hostile or
 * broken process must not grow Berth's memory without bound).
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private discarding = false;
  droppedLines = 0;

  constructor(private readonly maxLineChars = 16 * 1024 * 1024) {}

  push(chunk: Buffer | string): string[] {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    const lines = this.pending.split('\n');
    this.pending = lines.pop() ?? '';
    if (this.discarding && lines.length > 0) {
      lines.shift();
      this.discarding = false;
    }
    if (this.pending.length > this.maxLineChars) {
      this.pending = '';
      if (!this.discarding) this.droppedLines++;
      this.discarding = true;
    }
    return lines.filter((line) => {
      if (line.length > this.maxLineChars) {
        this.droppedLines++;
        return false;
      }
      return line.trim() !== '';
    });
  }

  flush(): string[] {
    const rest = (this.pending + this.decoder.end()).trim();
    this.pending = '';
    return rest === '' || this.discarding ? [] : [rest];
  }
}
