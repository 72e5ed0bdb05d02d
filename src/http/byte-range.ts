// The `Range` header of a download (RFC 9110 §14): one byte range, or none. Several ranges are answered
// with the whole file (a server may ignore Range); a range that starts past the end is unsatisfiable (416).

export type ByteRange = { readonly start: number; readonly end: number };

/** undefined: answer the whole file; 'unsatisfiable': 416; otherwise the inclusive range to send (206). */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const [first, last] = [match[1]!, match[2]!];
  if (first === '') {
    // A suffix: the last N bytes.
    const length = Number(last);
    if (length === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - length), end: size - 1 };
  }
  const start = Number(first);
  if (start >= size) return 'unsatisfiable';
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (end < start) return undefined;
  return { start, end };
}
