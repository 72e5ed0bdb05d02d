// Whether a file's first bytes can be shown as text, and the text. Workspaces hold what runs wrote: a
// binary file shown as text is noise, so anything with a NUL byte or that is not valid UTF-8 is offered
// as a download instead. Only the first PREVIEW_BYTES are fetched (an HTTP Range): a large log opens fast.

export const PREVIEW_BYTES = 256 * 1024;

export type Preview = { kind: 'text'; text: string; truncated: boolean } | { kind: 'binary' };

/** `bytes` (at most PREVIEW_BYTES + 1 of the file, the extra byte telling whether there is more) as a preview. */
export function preview(bytes: Uint8Array): Preview {
  const truncated = bytes.length > PREVIEW_BYTES;
  let shown = truncated ? bytes.subarray(0, PREVIEW_BYTES) : bytes;
  if (shown.includes(0)) return { kind: 'binary' };
  // A multi-byte character cut by the limit is not a sign of binary content: drop its lead bytes.
  if (truncated) shown = shown.subarray(0, completeUtf8Length(shown));
  try {
    return { kind: 'text', text: new TextDecoder('utf-8', { fatal: true }).decode(shown), truncated };
  } catch {
    return { kind: 'binary' };
  }
}

/** The length of `bytes` without a trailing incomplete UTF-8 sequence. */
function completeUtf8Length(bytes: Uint8Array): number {
  for (let back = 1; back <= 3 && back <= bytes.length; back += 1) {
    const byte = bytes[bytes.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back for the lead
    const needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needed > back ? bytes.length - back : bytes.length;
  }
  return bytes.length;
}
