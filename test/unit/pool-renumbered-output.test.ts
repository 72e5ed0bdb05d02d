// A warmed engine's output renumbered (src/core/pool/renumbered-output.ts): complete lines go on at once,
// an unfinished one waits for its end, stderr is never held, an over-long line is passed on unchanged
// instead of held, and an engine that was not warmed is not touched at all.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renumberedOutput } from '../../src/core/pool/renumbered-output.js';
import type { OutputChunk } from '../../src/runtime/container-runtime.js';

const out = (text: string): OutputChunk => ({ stream: 'stdout', data: Buffer.from(text) });
const err = (text: string): OutputChunk => ({ stream: 'stderr', data: Buffer.from(text) });

async function* source(chunks: readonly OutputChunk[]): AsyncGenerator<OutputChunk> {
  yield* chunks;
}

async function collect(output: AsyncIterable<OutputChunk>): Promise<string[]> {
  const seen: string[] = [];
  for await (const chunk of output) seen.push(`${chunk.stream}:${chunk.data.toString('utf8')}`);
  return seen;
}

test('an engine that was not warmed up keeps its output as it is', async () => {
  const input = source([out('{"type":"result","result_index":1}\n')]);
  assert.equal(renumberedOutput(input, 0), input);
});

test('complete lines go on at once, an unfinished one with its end, stderr at once', async () => {
  const seen = await collect(renumberedOutput(source([
    out('{"type":"system"}\n{"type":"res'), err('note\n'), out('ult","result_index":3}\n{"type"'), out(':"x"}'),
  ]), 1));
  assert.deepEqual(seen, ['stdout:{"type":"system"}\n', 'stderr:note\n', 'stdout:{"type":"result","result_index":2}\n', 'stdout:{"type":"x"}']);
});

test('multi-byte characters split between chunks arrive whole', async () => {
  const line = '{"type":"result","result":"größe ✓","result_index":1}\n';
  const bytes = Buffer.from(line);
  const cut = bytes.indexOf(Buffer.from('✓')) + 1;
  const seen = await collect(renumberedOutput(source([{ stream: 'stdout', data: bytes.subarray(0, cut) }, { stream: 'stdout', data: bytes.subarray(cut) }]), 1));
  assert.deepEqual(seen, ['stdout:{"type":"result","result":"größe ✓","result_index":0}\n']);
});

test('a line longer than the limit is passed on unchanged as it arrives, and the next line is renumbered again', async () => {
  const piece = 'x'.repeat(6 * 1024 * 1024);
  const chunks = [out(`{"type":"result","result":"${piece}`), out(piece), out(piece), out(piece), out('","result_index":1}\n{"type":"result","result_index":1}\n')];
  const seen = await collect(renumberedOutput(source(chunks), 1));
  const text = seen.map((chunk) => chunk.slice('stdout:'.length)).join('');
  assert.equal(text, `{"type":"result","result":"${piece.repeat(4)}","result_index":1}\n{"type":"result","result_index":0}\n`);
  assert.ok(seen.length >= 3, 'the long line went on in pieces');
});
