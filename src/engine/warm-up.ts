// Warming up an engine that waits for its first turn (core/pool), and taking the warm-up's traces out again.
//
// An engine's first turn runs much of its code for the first time: the system prompt and the tools'
// definitions, the handling of a user message, the session's start, its init and result events (about
// 40 ms to the first event, 45 ms to the result, on a 2-core host; later turns do not pay it). Two things,
// both answered by the engine itself, run that code while it waits:
// - a summary of its context usage (`get_context_usage`, a control request: computed locally, no request to
//   the model, nothing in the transcript);
// - a blank turn: a user message of whitespace only. The engine sends nothing to the model for it (no
//   request, no cost, `num_turns: 0`), prints an init, a "blank prompt" notice and a result, and writes three
//   records at the head of the transcript: the message queued and taken, and the notice.
// The model then gets exactly the request a fresh engine sends for the run's prompt (same messages, same
// system prompt, same tokens). Two traces remain, and Berth takes both out, so that a warmed engine's run
// is indistinguishable from a fresh one's: the three head records (withoutWarmUpTurn, when the transcript is
// carried back into the session; the first real record is then the root again), and the result numbering
// (the engine numbers its results in `result_index`, and the blank turn's was 0; renumberedResult).
import { turnLine } from './stream-json-input.js';

/** The request id of Berth's warm-up request. */
export const WARM_REQUEST_ID = 'berth-warm';

/** The control request that warms the system prompt's and tools' code. */
export const WARM_REQUEST = JSON.stringify({ type: 'control_request', request_id: WARM_REQUEST_ID, request: { subtype: 'get_context_usage', detail: 'summary' } });

/** Whether a stdout line is the engine's answer to WARM_REQUEST (success or error alike). */
export function isWarmAnswer(line: string): boolean {
  return line.includes(`"request_id":"${WARM_REQUEST_ID}"`);
}

/** The blank turn's prompt. Berth refuses blank prompts from callers, so only the warm-up writes one. */
export const WARM_PROMPT = ' ';

/** The blank turn, as a stream-json user message. */
export const WARM_TURN = turnLine(WARM_PROMPT);

/** Results a warmed engine has printed before its first real turn: the blank turn's. */
export const WARM_UP_RESULTS = 1;

/**
 * A result line numbered as a fresh engine numbers it: `result_index` lowered by `earlier`, the results
 * the engine printed before the caller's first turn. Other lines, and lines without the field, are
 * returned as they are. Only the field's own characters change: in a JSON line an unescaped
 * `"result_index":` can only be a key, and the top-level one is the last.
 */
export function renumberedResult(line: string, earlier: number): string {
  if (earlier === 0 || !line.includes('"result_index":')) return line;
  let index: unknown;
  try {
    const event = JSON.parse(line) as { type?: unknown; result_index?: unknown };
    if (event.type !== 'result') return line;
    index = event.result_index;
  } catch {
    return line;
  }
  if (typeof index !== 'number' || !Number.isInteger(index) || index < earlier) return line;
  const field = `"result_index":${index}`;
  const at = line.lastIndexOf(field);
  const next = line[at + field.length];
  if (at < 0 || (next !== ',' && next !== '}')) return line;
  return `${line.slice(0, at)}"result_index":${index - earlier}${line.slice(at + field.length)}`;
}

interface HeadRecord {
  readonly type?: unknown;
  readonly operation?: unknown;
  readonly content?: unknown;
  readonly parentUuid?: unknown;
  readonly uuid?: unknown;
}

/**
 * A transcript without the blank turn's records, when it starts with them: the warm-up prompt queued and
 * taken, then the engine's notice (a system record, the root of the conversation). The records that named
 * the notice as their parent become roots, as the first record of a fresh engine's session is. Any other
 * transcript is returned as it is.
 */
export function withoutWarmUpTurn(transcript: Buffer): Buffer {
  // Carried back after every run: only a transcript whose first line is the warm-up is read whole.
  const firstEnd = transcript.indexOf(0x0a);
  const queued = parseRecord(transcript.subarray(0, firstEnd < 0 ? transcript.length : firstEnd).toString('utf8'));
  if (queued?.type !== 'queue-operation' || queued.operation !== 'enqueue' || queued.content !== WARM_PROMPT) return transcript;
  const lines = transcript.toString('utf8').split('\n');
  const [taken, notice] = lines.slice(1, 3).map(parseRecord);
  if (taken?.type !== 'queue-operation' || taken.operation !== 'dequeue') return transcript;
  if (notice?.type !== 'system' || notice.parentUuid !== null || typeof notice.uuid !== 'string') return Buffer.from(lines.slice(2).join('\n'));
  const parent = `"parentUuid":${JSON.stringify(notice.uuid)}`;
  const reparented = lines.slice(3).map((line) => (line.includes(parent) && parseRecord(line)?.parentUuid === notice.uuid ? line.replace(parent, '"parentUuid":null') : line));
  return Buffer.from(reparented.join('\n'));
}

function parseRecord(line: string | undefined): HeadRecord | undefined {
  if (line === undefined || line.trim() === '') return undefined;
  try {
    const record = JSON.parse(line) as unknown;
    return typeof record === 'object' && record !== null ? (record as HeadRecord) : undefined;
  } catch {
    return undefined;
  }
}
