// Podman's logs and attach endpoints frame output (without a TTY) as Docker's multiplexed stream:
// an 8-byte header (stream byte, 3 zero bytes, big-endian length) before each chunk.
import type { OutputChunk } from '../ports/containers.js';

const HEADER_BYTES = 8;

export async function* demultiplex(source: AsyncIterable<Buffer>): AsyncGenerator<OutputChunk> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const piece of source) {
    pending = pending.length === 0 ? piece : Buffer.concat([pending, piece]);
    while (pending.length >= HEADER_BYTES) {
      const length = pending.readUInt32BE(4);
      if (pending.length < HEADER_BYTES + length) break;
      const stream = pending[0] === 2 ? 'stderr' : 'stdout';
      yield { stream, data: pending.subarray(HEADER_BYTES, HEADER_BYTES + length) };
      pending = pending.subarray(HEADER_BYTES + length);
    }
  }
}
