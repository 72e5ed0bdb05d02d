import { test } from 'node:test';
import assert from 'node:assert/strict';
import { demultiplex } from '../../src/runtime/podman/multiplexed-stream.js';

function frame(stream: number, text: string): Buffer {
  const data = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(data.length, 4);
  return Buffer.concat([header, data]);
}

test('demultiplex splits Podman frames even when they arrive cut at any byte', async () => {
  const whole = Buffer.concat([frame(1, 'out one\n'), frame(2, 'err\n'), frame(1, 'out two')]);
  for (let cut = 1; cut < whole.length; cut++) {
    async function* pieces() {
      yield whole.subarray(0, cut);
      yield whole.subarray(cut);
    }
    const chunks = [];
    for await (const chunk of demultiplex(pieces())) chunks.push(`${chunk.stream}:${chunk.data.toString()}`);
    assert.deepEqual(chunks, ['stdout:out one\n', 'stderr:err\n', 'stdout:out two']);
  }
});
