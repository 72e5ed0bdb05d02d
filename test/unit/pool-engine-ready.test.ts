// The preparation of a pooled engine (initialize, then the warm-up request), on a fake attachment: the
// answers may arrive in pieces, are not handed on, stderr and bytes after the warm-up answer are; the engine
// is ready only after the warm-up answer (an error answer counts); one that ends or stays silent fails.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { awaitEngineReady, EngineNotReadyError } from '../../src/core/pool/engine-ready.js';
import { READY_REQUEST, WARM_REQUEST } from '../../src/engine/stream-json-input.js';
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
const readyAnswer = '{"type":"control_response","response":{"subtype":"success","request_id":"berth-ready"}}';
const answer = '{"type":"control_response","response":{"subtype":"success","request_id":"berth-warm","response":{"categories":[]}}}';

async function collect(output: AsyncIterable<OutputChunk>): Promise<string[]> {
  const seen: string[] = [];
  for await (const chunk of output) seen.push(`${chunk.stream}:${chunk.data.toString('utf8')}`);
  return seen;
}

test('writes the initialize and warm-up requests and hands on stderr and what follows the warm-up answer', async () => {
  const { attached, written } = fakeAttachment([
    err('warming up\n'), out(`${readyAnswer}\n`), out(answer.slice(0, 20)), out(`${answer.slice(20)}\n{"type":"system"`), out('}\n'),
  ]);
  const ready = await awaitEngineReady(attached, 1_000);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(written, [`${READY_REQUEST}\n${WARM_REQUEST}\n`]);
  assert.deepEqual(JSON.parse(WARM_REQUEST), { type: 'control_request', request_id: 'berth-warm', request: { subtype: 'get_context_usage', detail: 'summary' } });
  assert.deepEqual(await collect(ready.output), ['stderr:warming up\n', 'stdout:{"type":"system"', 'stdout:}\n']);
  assert.equal(ready.stdin, attached.stdin);
});

test('an engine that answered only the initialize request is not ready yet', async () => {
  const { attached } = fakeAttachment([out(`${readyAnswer}\n`)], { hang: true });
  await assert.rejects(awaitEngineReady(attached, 50), EngineNotReadyError);
});

test('an engine that refuses the warm-up request is ready all the same (a later engine may not know it)', async () => {
  const refusal = '{"type":"control_response","response":{"subtype":"error","request_id":"berth-warm","error":"unsupported"}}';
  const { attached } = fakeAttachment([out(`${readyAnswer}\n${refusal}\n`)], { hang: true });
  await awaitEngineReady(attached, 1_000);
});

test('an engine that exits before it answers is not ready', async () => {
  const { attached } = fakeAttachment([out('{"type":"other"}\n')]);
  await assert.rejects(awaitEngineReady(attached, 1_000), EngineNotReadyError);
});

test('an engine that stays silent is not ready after the timeout', async () => {
  const { attached } = fakeAttachment([], { hang: true });
  await assert.rejects(awaitEngineReady(attached, 50), /did not answer its initialize and warm-up requests within 0.05 s/);
});
