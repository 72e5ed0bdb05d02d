// The token usage of a Messages API answer, read from a copy of the bytes as they pass through the gateway.
// The answer itself is never held back: the tap is fed each chunk after it was written to the engine.
//  - Streaming (text/event-stream): `message_start` carries the model and the input/cache counts;
//    `message_delta` carries the output count so far (cumulative: the last one wins) and, from newer API
//    versions, final input/cache counts too. Only those two events are parsed: the many content deltas of a
//    long answer are recognised by a substring and skipped.
//  - Not streaming (application/json): the body is copied (at most MAX_JSON_BYTES) and parsed at its end.
import { StringDecoder } from 'node:string_decoder';
import type { TokenCounts } from '../core/gateway/gateway-types.js';

/** A non-streaming answer larger than this is forwarded whole but not counted (real ones are far smaller). */
export const MAX_JSON_BYTES = 8 * 1024 * 1024;
/** An event line longer than this is skipped: usage events are short, long lines are content deltas. */
const MAX_LINE_CHARS = 1024 * 1024;

export interface TappedUsage {
  /** The model named by the answer; undefined when the answer carried none (an error, another endpoint). */
  readonly model: string | undefined;
  readonly tokens: TokenCounts;
  /** Whether any usage object was seen. */
  readonly seen: boolean;
}

const TOKEN_FIELDS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;
type TokenField = (typeof TOKEN_FIELDS)[number];

/** The two usage-bearing events, as they appear unescaped at the top level of a `data:` line. */
const USAGE_EVENT = /"type"\s*:\s*"message_(?:start|delta)"/;

export class UsageTap {
  private readonly kind: 'sse' | 'json' | 'other';
  private readonly decoder = new StringDecoder('utf8');
  private pendingLine = '';
  private skippingLine = false;
  private readonly jsonChunks: Buffer[] = [];
  private jsonBytes = 0;
  private model: string | undefined;
  private readonly tokens: Record<TokenField, number> = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  private seen = false;

  constructor(contentType: string | undefined) {
    const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
    this.kind = type === 'text/event-stream' ? 'sse' : type === 'application/json' ? 'json' : 'other';
  }

  feed(chunk: Buffer): void {
    if (this.kind === 'sse') this.feedEvents(this.decoder.write(chunk));
    else if (this.kind === 'json' && this.jsonBytes <= MAX_JSON_BYTES) {
      this.jsonBytes += chunk.length;
      if (this.jsonBytes <= MAX_JSON_BYTES) this.jsonChunks.push(chunk);
      else this.jsonChunks.length = 0;
    }
  }

  /** What the answer said, once it ended (or as far as it came). */
  result(): TappedUsage {
    if (this.kind === 'sse') {
      this.feedEvents(this.decoder.end());
      if (!this.skippingLine) this.readLine(this.pendingLine);
      this.pendingLine = '';
    } else if (this.kind === 'json' && this.jsonChunks.length > 0) {
      const body = parse(Buffer.concat(this.jsonChunks).toString('utf8'));
      this.jsonChunks.length = 0;
      if (isObject(body)) {
        this.takeModel(body['model']);
        this.takeUsage(body['usage']);
      }
    }
    return { model: this.model, tokens: { ...this.tokens }, seen: this.seen };
  }

  private feedEvents(text: string): void {
    let start = 0;
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      const piece = text.slice(start, end);
      if (!this.skippingLine) this.readLine(this.pendingLine === '' ? piece : this.pendingLine + piece);
      this.pendingLine = '';
      this.skippingLine = false;
      start = end + 1;
    }
    if (start < text.length && !this.skippingLine) {
      this.pendingLine += text.slice(start);
      if (this.pendingLine.length > MAX_LINE_CHARS) {
        this.pendingLine = '';
        this.skippingLine = true;
      }
    }
  }

  private readLine(rawLine: string): void {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (!line.startsWith('data:') || !USAGE_EVENT.test(line)) return;
    const event = parse(line.slice(5));
    if (!isObject(event)) return;
    if (event['type'] === 'message_start' && isObject(event['message'])) {
      this.takeModel(event['message']['model']);
      this.takeUsage(event['message']['usage']);
    } else if (event['type'] === 'message_delta') {
      this.takeUsage(event['usage']);
    }
  }

  private takeModel(model: unknown): void {
    if (typeof model === 'string' && model !== '') this.model = model;
  }

  /** Fields present replace what was known (the API's counts are running totals); absent ones are kept. */
  private takeUsage(usage: unknown): void {
    if (!isObject(usage)) return;
    this.seen = true;
    for (const field of TOKEN_FIELDS) {
      const value = usage[field];
      if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) this.tokens[field] = value;
    }
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
