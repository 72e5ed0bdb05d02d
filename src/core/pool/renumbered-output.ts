// A warmed engine's output as a fresh engine's reads (engine/warm-up.ts): its result lines numbered from 0
// again. Stdout is passed on line by line as lines complete, so a result line is whole when it is
// renumbered; every other byte, and stderr, goes through untouched and at once.
import type { OutputChunk } from '../../runtime/ports/containers.js';
import { renumberedResult } from '../../engine/warm-up.js';

/**
 * The longest unfinished line held back (the engine's lines are read with the same bound downstream): a
 * longer one is passed on as it arrives, unchanged, so that a process printing without newlines cannot
 * grow Berth's memory.
 */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

const NEWLINE = 0x0a;
const FIELD = Buffer.from('"result_index":');

/** `output` with each result line's `result_index` lowered by `earlier` (0: `output` itself). */
export function renumberedOutput(output: AsyncIterable<OutputChunk>, earlier: number): AsyncIterable<OutputChunk> {
  return earlier === 0 ? output : renumbering(output, earlier);
}

async function* renumbering(output: AsyncIterable<OutputChunk>, earlier: number): AsyncGenerator<OutputChunk> {
  let held = Buffer.alloc(0);
  let passingLongLine = false;
  for await (const chunk of output) {
    if (chunk.stream !== 'stdout') {
      yield chunk;
      continue;
    }
    let data = chunk.data;
    if (passingLongLine) {
      const end = data.indexOf(NEWLINE);
      if (end < 0) {
        yield chunk;
        continue;
      }
      yield { stream: 'stdout', data: data.subarray(0, end + 1) };
      passingLongLine = false;
      data = data.subarray(end + 1);
    }
    const pending = held.length > 0 ? Buffer.concat([held, data]) : data;
    const lastEnd = pending.lastIndexOf(NEWLINE);
    if (lastEnd >= 0) yield { stream: 'stdout', data: renumberedLines(pending.subarray(0, lastEnd + 1), earlier) };
    held = Buffer.from(pending.subarray(lastEnd + 1));
    if (held.length > MAX_HELD_BYTES) {
      yield { stream: 'stdout', data: held };
      held = Buffer.alloc(0);
      passingLongLine = true;
    }
  }
  if (held.length > 0) yield { stream: 'stdout', data: held };
}

/** Complete lines (ending in a newline) with their result lines renumbered. */
function renumberedLines(lines: Buffer, earlier: number): Buffer {
  if (!lines.includes(FIELD)) return lines;
  const parts: Buffer[] = [];
  let start = 0;
  for (let end = lines.indexOf(NEWLINE); end >= 0; end = lines.indexOf(NEWLINE, start)) {
    const line = lines.subarray(start, end);
    if (line.includes(FIELD)) {
      const text = line.toString('utf8');
      const renumbered = renumberedResult(text, earlier);
      parts.push(renumbered === text ? line : Buffer.from(renumbered));
    } else parts.push(line);
    parts.push(lines.subarray(end, end + 1));
    start = end + 1;
  }
  return Buffer.concat(parts);
}
