// The preparation of a pre-started engine, done while it waits in the pool: Berth writes the initialize
// control request and the warm-up (engine/warm-up.ts: a context-usage request and a blank turn) and reads
// stdout until the engine has answered the request and ended the blank turn, so that the run or agent that
// claims the engine pays only for its own turn. The attach stream has one reader; what was read past the
// blank turn's result is handed on, and the engine's later result lines are numbered as a fresh engine's.
import type { AttachedContainer, OutputChunk } from '../../runtime/ports/containers.js';
import { READY_REQUEST } from '../../engine/stream-json-input.js';
import { parseEngineLine } from '../../engine/stream-json.js';
import { WARM_REQUEST, WARM_TURN, WARM_UP_RESULTS, isWarmAnswer } from '../../engine/warm-up.js';
import { renumberedOutput } from './renumbered-output.js';

/** The engine ended or stayed silent before it answered. */
export class EngineNotReadyError extends Error {}

/**
 * Writes the initialize request and the warm-up, and waits until the engine has answered the warm-up
 * request and printed the blank turn's result (it handles its input in order, so the initialize answer
 * came first); resolves with the same attachment whose output continues after that result's line (stderr
 * and any later bytes kept, result lines renumbered). Rejects after `timeoutMs`.
 */
export async function awaitEngineReady(attached: AttachedContainer, timeoutMs: number): Promise<AttachedContainer> {
  const iterator = attached.output[Symbol.asyncIterator]();
  attached.stdin.write(`${READY_REQUEST}\n${WARM_REQUEST}\n${WARM_TURN}\n`);
  const heldBack: OutputChunk[] = [];
  const warmUp = new WarmUpProgress();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new EngineNotReadyError(`the engine did not answer its initialize and warm-up within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), timeout]);
      if (next.done) throw new EngineNotReadyError('the engine exited before it answered its initialize and warm-up');
      const chunk = next.value;
      if (chunk.stream === 'stderr') {
        heldBack.push(chunk);
        continue;
      }
      const rest = warmUp.read(chunk.data);
      if (rest === undefined) continue;
      if (rest.length > 0) heldBack.push({ stream: 'stdout', data: rest });
      return { ...attached, output: renumberedOutput(continued(heldBack, iterator), WARM_UP_RESULTS) };
    }
  } finally {
    clearTimeout(timer);
  }
}

/** Reads the engine's stdout line by line until both parts of the warm-up are answered. */
class WarmUpProgress {
  private unread: Buffer = Buffer.alloc(0);
  private answered = false;
  private blankTurnEnded = false;

  /** The bytes after the line that completed the warm-up, or undefined while it is not complete. */
  read(data: Buffer): Buffer | undefined {
    this.unread = this.unread.length > 0 ? Buffer.concat([this.unread, data]) : data;
    let start = 0;
    for (let end = this.unread.indexOf(0x0a); end >= 0; end = this.unread.indexOf(0x0a, start)) {
      const line = this.unread.subarray(start, end).toString('utf8');
      start = end + 1;
      if (isWarmAnswer(line)) this.answered = true;
      else if (parseEngineLine(line).kind === 'result') this.blankTurnEnded = true;
      if (this.answered && this.blankTurnEnded) return this.unread.subarray(start);
    }
    this.unread = this.unread.subarray(start);
    return undefined;
  }
}

async function* continued(heldBack: readonly OutputChunk[], iterator: AsyncIterator<OutputChunk>): AsyncGenerator<OutputChunk> {
  yield* heldBack;
  for (;;) {
    const next = await iterator.next();
    if (next.done) return;
    yield next.value;
  }
}
