// The preparation of a pre-started engine, done while it waits in the pool: Berth writes the initialize
// control request and the warm-up request (stream-json-input.ts) and reads stdout until the engine has
// answered both, so that the run or agent that claims the engine pays only for its turn. The attach stream
// has one reader; what was read past the answers is handed on.
import type { AttachedContainer, OutputChunk } from '../../runtime/container-runtime.js';
import { READY_REQUEST, WARM_REQUEST, isWarmAnswer } from '../../engine/stream-json-input.js';

/** The engine ended or stayed silent before it answered. */
export class EngineNotReadyError extends Error {}

/**
 * Writes the initialize and warm-up requests and waits for the answer to the second (the engine answers
 * control requests in order); resolves with the same attachment whose output continues after that answer's
 * line (stderr and any later bytes kept). Rejects after `timeoutMs`.
 */
export async function awaitEngineReady(attached: AttachedContainer, timeoutMs: number): Promise<AttachedContainer> {
  const iterator = attached.output[Symbol.asyncIterator]();
  attached.stdin.write(`${READY_REQUEST}\n${WARM_REQUEST}\n`);
  const heldBack: OutputChunk[] = [];
  let stdout = Buffer.alloc(0);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new EngineNotReadyError(`the engine did not answer its initialize and warm-up requests within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), timeout]);
      if (next.done) throw new EngineNotReadyError('the engine exited before it answered its initialize and warm-up requests');
      const chunk = next.value;
      if (chunk.stream === 'stderr') {
        heldBack.push(chunk);
        continue;
      }
      stdout = Buffer.concat([stdout, chunk.data]);
      const rest = readyRest(stdout);
      if (rest === undefined) continue;
      if (rest.length > 0) heldBack.push({ stream: 'stdout', data: rest });
      return { ...attached, output: continued(heldBack, iterator) };
    }
  } finally {
    clearTimeout(timer);
  }
}

/** The bytes after the warm-up answer's line, or undefined while no complete line holds it. */
function readyRest(stdout: Buffer): Buffer | undefined {
  let start = 0;
  for (let end = stdout.indexOf(0x0a); end >= 0; end = stdout.indexOf(0x0a, start)) {
    const line = stdout.subarray(start, end).toString('utf8');
    start = end + 1;
    if (isWarmAnswer(line)) return stdout.subarray(start);
  }
  return undefined;
}

async function* continued(heldBack: readonly OutputChunk[], iterator: AsyncIterator<OutputChunk>): AsyncGenerator<OutputChunk> {
  yield* heldBack;
  for (;;) {
    const next = await iterator.next();
    if (next.done) return;
    yield next.value;
  }
}
