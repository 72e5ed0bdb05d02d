// The initialize handshake of a pooled agent engine, on a fake attachment: the answer may arrive in
// pieces, stderr and bytes after the answer are handed on, an engine that ends or stays silent fails.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { awaitEngineReady, EngineNotReadyError } from '../../src/core/pool/engine-ready.js';
import { READY_REQUEST } from '../../src/engine/stream-json-input.js';
import type { AttachedContainer, OutputChunk } from '../../src/runtime/container-runtime.js';

function fakeAttachment(chunks: readonly OutputChunk[], options: { readonly hang?: boolean } = {}) {
  const stdin = new PassThrough();
  const written: string[] = [];
  stdin.on('data', (data: Buffer) => written.push(data.toString('utf8')));
  const attached: AttachedContainer = {
    stdin,
    output: (async function* () {
      yield* chunks;
      if (options.hang) await new Promise(() => undefined);
    })(),
    close: () => undefined,
  };
  return { attached, written };
}

const out = (text: string): OutputChunk => ({ stream: 'stdout', data: Buffer.from(text) });
const err = (text: string): OutputChunk => ({ stream: 'stderr', data: Buffer.from(text) });
const answer = '{"type":"control_response","response":{"subtype":"success","request_id":"berth-ready"}}';

async function collect(output: AsyncIterable<OutputChunk>): Promise<string[]> {
  const seen: string[] = [];
  for await (const chunk of output) seen.push(`${chunk.stream}:${chunk.data.toString('utf8')}`);
  return seen;
}

test('writes the initialize request and hands on stderr and what follows the answer', async () => {
  const { attached, written } = fakeAttachment([err('warming up\n'), out(answer.slice(0, 20)), out(`${answer.slice(20)}\n{"type":"system"`), out('}\n')]);
  const ready = await awaitEngineReady(attached, 1_000);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(written, [`${READY_REQUEST}\n`]);
  assert.deepEqual(await collect(ready.output), ['stderr:warming up\n', 'stdout:{"type":"system"', 'stdout:}\n']);
  assert.equal(ready.stdin, attached.stdin);
});

test('an engine that exits before it answers is not ready', async () => {
  const { attached } = fakeAttachment([out('{"type":"other"}\n')]);
  await assert.rejects(awaitEngineReady(attached, 1_000), EngineNotReadyError);
});

test('an engine that stays silent is not ready after the timeout', async () => {
  const { attached } = fakeAttachment([], { hang: true });
  await assert.rejects(awaitEngineReady(attached, 50), /did not answer its initialize request within 0.05 s/);
});
