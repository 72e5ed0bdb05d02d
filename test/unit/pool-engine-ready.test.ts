// The preparation of a pooled engine (initialize, the warm-up request, the blank turn), on a fake
// attachment: the answers and the blank turn's events may arrive in pieces and are not handed on; stderr
// and the bytes after the blank turn's result are, with later results numbered as a fresh engine's; the
// engine is ready only once it answered the warm-up request (an error answer counts) and ended the blank
// turn; one that ends or stays silent fails.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { awaitEngineReady, EngineNotReadyError } from '../../src/core/pool/engine-ready.js';
import { READY_REQUEST } from '../../src/engine/stream-json-input.js';
import { WARM_REQUEST, WARM_TURN } from '../../src/engine/warm-up.js';
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
const blankTurn = [
  '{"type":"system","subtype":"init","session_id":"s"}',
  '{"type":"system","subtype":"informational","content":"Blank prompt"}',
  '{"is_error":false,"num_turns":0,"type":"result","result_index":0}',
].join('\n');

async function collect(output: AsyncIterable<OutputChunk>): Promise<string[]> {
  const seen: string[] = [];
  for await (const chunk of output) seen.push(`${chunk.stream}:${chunk.data.toString('utf8')}`);
  return seen;
}

test('writes the initialize request, the warm-up request and the blank turn; hands on stderr and what follows the blank turn', async () => {
  const { attached, written } = fakeAttachment([
    err('warming up\n'), out(`${readyAnswer}\n`), out(answer.slice(0, 20)), out(`${answer.slice(20)}\n${blankTurn.slice(0, 30)}`),
    out(`${blankTurn.slice(30)}\n{"type":"system"`), out('}\n'),
  ]);
  const ready = await awaitEngineReady(attached, 1_000);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(written, [`${READY_REQUEST}\n${WARM_REQUEST}\n${WARM_TURN}\n`]);
  assert.deepEqual(JSON.parse(WARM_REQUEST), { type: 'control_request', request_id: 'berth-warm', request: { subtype: 'get_context_usage', detail: 'summary' } });
  assert.deepEqual(await collect(ready.output), ['stderr:warming up\n', 'stdout:{"type":"system"}\n']);
  assert.equal(ready.stdin, attached.stdin);
});

test('the results after the warm-up are numbered from 0, as a fresh engine numbers them, also when they arrive in pieces', async () => {
  const first = '{"type":"result","result":"a","result_index":1}';
  const second = '{"type":"result","result":"b","result_index":2}';
  const { attached } = fakeAttachment([
    out(`${readyAnswer}\n${answer}\n${blankTurn}\n{"type":"assistant"}\n${first.slice(0, 25)}`), err('between\n'), out(`${first.slice(25)}\n`),
    out(`${second}\n`),
  ]);
  const ready = await awaitEngineReady(attached, 1_000);
  assert.deepEqual(await collect(ready.output), [
    'stdout:{"type":"assistant"}\n',
    'stderr:between\n',
    'stdout:{"type":"result","result":"a","result_index":0}\n',
    'stdout:{"type":"result","result":"b","result_index":1}\n',
  ]);
});

test('an engine that answered the warm-up request but has not ended the blank turn is not ready yet', async () => {
  const { attached } = fakeAttachment([out(`${readyAnswer}\n${answer}\n{"type":"system","subtype":"init"}\n`)], { hang: true });
  await assert.rejects(awaitEngineReady(attached, 50), EngineNotReadyError);
});

test('an engine that refuses the warm-up request is ready all the same once the blank turn ended (a later engine may not know it)', async () => {
  const refusal = '{"type":"control_response","response":{"subtype":"error","request_id":"berth-warm","error":"unsupported"}}';
  const { attached } = fakeAttachment([out(`${readyAnswer}\n${refusal}\n${blankTurn}\n`)], { hang: true });
  await awaitEngineReady(attached, 1_000);
});

test('an engine that exits before it answers is not ready', async () => {
  const { attached } = fakeAttachment([out('{"type":"other"}\n')]);
  await assert.rejects(awaitEngineReady(attached, 1_000), EngineNotReadyError);
});

test('an engine that stays silent is not ready after the timeout', async () => {
  const { attached } = fakeAttachment([], { hang: true });
  await assert.rejects(awaitEngineReady(attached, 50), /did not answer its initialize and warm-up within 0.05 s/);
});
