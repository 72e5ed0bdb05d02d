// A run's output read again from Podman's log, when a later Berth process follows the run (an async job
// after a restart). A pooled engine's log begins with what the run never saw live: the answers to the
// pool's control requests and the warm-up's blank turn (engine/warm-up.ts, core/pool/engine-ready.ts).
// Left in, the blank turn's result would be taken for the run's own: the run would end its credential at
// once (the engine's next model request refused) and report the wrong result. This leaves that head out
// and numbers the later results as the live run saw them; a container made for its run passes unchanged.
import type { OutputChunk } from '../../runtime/ports/containers.js';
import { parseEngineLine } from '../../engine/stream-json.js';
import { WARM_UP_RESULTS, isWarmAnswer } from '../../engine/warm-up.js';
import { renumberedOutput } from './renumbered-output.js';

const NEWLINE = 0x0a;
/** The longest unfinished line held back; a longer one is passed on as it is (the engine's lines are bounded downstream too). */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

export function withoutWarmUp(output: AsyncIterable<OutputChunk>): AsyncIterable<OutputChunk> {
  return replay(output[Symbol.asyncIterator]());
}

async function* replay(iterator: AsyncIterator<OutputChunk>): AsyncGenerator<OutputChunk> {
  let held = Buffer.alloc(0);
  let warmAnswered = false;
  for (;;) {
    const next = await iterator.next();
    if (next.done) {
      if (held.length > 0) yield { stream: 'stdout', data: held };
      return;
    }
    const chunk = next.value;
    if (chunk.stream !== 'stdout') {
      yield chunk;
      continue;
    }
    const pending = held.length > 0 ? Buffer.concat([held, chunk.data]) : chunk.data;
    let start = 0;
    for (let end = pending.indexOf(NEWLINE); end >= 0; end = pending.indexOf(NEWLINE, start)) {
      const line = pending.subarray(start, end + 1);
      start = end + 1;
      const text = line.toString('utf8');
      // Answers to control requests: only the pool sends them to an engine a run then takes over.
      if (text.includes('"type":"control_response"')) {
        if (isWarmAnswer(text)) warmAnswered = true;
        continue;
      }
      if (!warmAnswered) {
        yield { stream: 'stdout', data: Buffer.from(line) };
        continue;
      }
      // Inside the blank turn, which ends with its result: the rest is the run's.
      if (parseEngineLine(text.trimEnd()).kind !== 'result') continue;
      const rest = Buffer.from(pending.subarray(start));
      yield* renumberedOutput(continued(rest, iterator), WARM_UP_RESULTS);
      return;
    }
    held = Buffer.from(pending.subarray(start));
    if (held.length > MAX_HELD_BYTES) {
      yield { stream: 'stdout', data: held };
      held = Buffer.alloc(0);
    }
  }
}

async function* continued(first: Buffer, iterator: AsyncIterator<OutputChunk>): AsyncGenerator<OutputChunk> {
  if (first.length > 0) yield { stream: 'stdout', data: first };
  for (;;) {
    const next = await iterator.next();
    if (next.done) return;
    yield next.value;
  }
}
