// Session titles. A new session is titled from its first prompt, recorded the way the engine records a title
// itself: a `custom-title` record in the session's transcript, which the engine reads back (and re-appends)
// when the session is resumed, and which `GET /sessions` lists. The engine writes that record when a
// UserPromptSubmit hook names a title; Berth writes it instead, when it carries the run's transcript back
// into the session (core/sessions/run-config-dirs.ts): a hook costs every first turn a shell start inside
// the container (15-20 ms of a pooled run's ~150 ms), and Berth has the prompt anyway.

export const TITLE_MAX_CHARS = 60;

/**
 * A short title from a prompt: its first line that has any text, control characters removed,
 * whitespace collapsed, cut at a word boundary to at most TITLE_MAX_CHARS characters (code points)
 * with an ellipsis. Undefined when the prompt has no text at all.
 */
export function deriveSessionTitle(prompt: string): string | undefined {
  const line = prompt
    .split(/\r?\n|\r/)
    .map((candidate) => candidate.replace(/[\p{Cc}\p{Cf}]/gu, ' ').replace(/\s+/gu, ' ').trim())
    .find((candidate) => candidate !== '');
  if (line === undefined) return undefined;
  const chars = [...line];
  if (chars.length <= TITLE_MAX_CHARS) return line;
  const cut = chars.slice(0, TITLE_MAX_CHARS - 1).join('');
  const space = cut.lastIndexOf(' ');
  // Cut at the last word boundary unless that throws away most of the line (one long word).
  const head = space >= TITLE_MAX_CHARS / 2 ? cut.slice(0, space) : cut;
  return `${head.trimEnd()}…`;
}

/** The engine's own title record, as one transcript line. */
export function titleRecord(title: string, sessionId: string): string {
  return `${JSON.stringify({ type: 'custom-title', customTitle: title, sessionId })}\n`;
}

/**
 * A transcript with the title record appended, unless it already has a title record (a title the engine
 * wrote is kept). A last line the engine left unfinished is ended first, so the record is a line of its own.
 */
export function withTitle(transcript: Buffer, title: string, sessionId: string): Buffer {
  if (hasTitleRecord(transcript)) return transcript;
  const ending = transcript.length > 0 && transcript[transcript.length - 1] !== 0x0a ? '\n' : '';
  return Buffer.concat([transcript, Buffer.from(`${ending}${titleRecord(title, sessionId)}`)]);
}

function hasTitleRecord(transcript: Buffer): boolean {
  if (!transcript.includes('"custom-title"')) return false;
  for (const line of transcript.toString('utf8').split('\n')) {
    if (!line.includes('"custom-title"')) continue;
    try {
      if ((JSON.parse(line) as { type?: unknown }).type === 'custom-title') return true;
    } catch {
      // A broken line is no record.
    }
  }
  return false;
}
