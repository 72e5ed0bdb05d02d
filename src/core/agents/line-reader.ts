// Splits a byte stream into lines without ever holding more than one line's limit in memory: a line
// longer than the limit is replaced by a single truncation marker, and reading continues with the next
// line (agents' stdout lines over 10 MiB become a marker).

export const MAX_LINE_BYTES = 10 * 1024 * 1024;
/** How much of a truncated line is kept. */
export const TRUNCATED_HEAD_BYTES = 256;

// Marks looked for in a line too long to keep, so that a truncated end-of-turn `result` line still ends
// its turn. Inside JSON strings quotes are escaped, so these byte sequences only occur as JSON structure.
const RESULT_MARK = Buffer.from('"type":"result"');
const ERROR_MARK = Buffer.from('"is_error":true');
const CARRY_BYTES = Math.max(RESULT_MARK.length, ERROR_MARK.length) - 1;

export type ReadLine =
  | { readonly kind: 'line'; readonly text: string }
  | {
      readonly kind: 'truncated';
      readonly bytes: number;
      readonly head: string;
      /** Whether the line carried `"type":"result"` / `"is_error":true` somewhere. */
      readonly resultMark: boolean;
      readonly errorMark: boolean;
    };

/** The content of the output event that stands for a truncated line: one JSON line, like the engine's own. */
export function truncationMarker(bytes: number, limit = MAX_LINE_BYTES): string {
  return JSON.stringify({ type: 'berth_truncated', bytes, limit_bytes: limit });
}

export class LineReader {
  private parts: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of the current over-long line seen so far; undefined while the line is within the limit. */
  private skipped: number | undefined;
  private head = '';
  private carry: Buffer = Buffer.alloc(0);
  private resultMark = false;
  private errorMark = false;

  constructor(private readonly limit = MAX_LINE_BYTES) {}

  push(chunk: Buffer): ReadLine[] {
    const lines: ReadLine[] = [];
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      this.append(chunk.subarray(start, end));
      if (newline === -1) break;
      const line = this.take();
      if (line) lines.push(line);
      start = newline + 1;
    }
    return lines;
  }

  /** The last line when the stream ended without a newline. */
  flush(): ReadLine[] {
    const line = this.take();
    return line ? [line] : [];
  }

  private append(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipped !== undefined) {
      this.skipped += piece.length;
      this.scan(piece);
      return;
    }
    if (this.pendingBytes + piece.length > this.limit) {
      // The line is over the limit: keep its head and count the rest instead of buffering it.
      const all = Buffer.concat([...this.parts, piece]);
      this.head = all.subarray(0, TRUNCATED_HEAD_BYTES).toString('utf8');
      this.skipped = all.length;
      this.carry = Buffer.alloc(0);
      this.scan(all);
      this.parts = [];
      this.pendingBytes = 0;
      return;
    }
    this.parts.push(piece);
    this.pendingBytes += piece.length;
  }

  /** Looks for the marks in a skipped piece, across piece boundaries. */
  private scan(piece: Buffer): void {
    const window = this.carry.length > 0 ? Buffer.concat([this.carry, piece]) : piece;
    if (!this.resultMark && window.includes(RESULT_MARK)) this.resultMark = true;
    if (!this.errorMark && window.includes(ERROR_MARK)) this.errorMark = true;
    this.carry = Buffer.from(window.subarray(Math.max(0, window.length - CARRY_BYTES)));
  }

  private take(): ReadLine | undefined {
    if (this.skipped !== undefined) {
      const line: ReadLine = { kind: 'truncated', bytes: this.skipped, head: this.head, resultMark: this.resultMark, errorMark: this.errorMark };
      this.skipped = undefined;
      this.head = '';
      this.resultMark = false;
      this.errorMark = false;
      return line;
    }
    const text = Buffer.concat(this.parts).toString('utf8').replace(/\r$/, '');
    this.parts = [];
    this.pendingBytes = 0;
    return text.trim() === '' ? undefined : { kind: 'line', text };
  }
}
