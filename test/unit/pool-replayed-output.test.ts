// A run followed again from Podman's log (core/pool/replayed-output.ts): a pooled engine's warm-up head is
// left out, so its blank turn's result is not taken for the run's; a container made for its run passes unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withoutWarmUp } from '../../src/core/pool/replayed-output.js';
import type { OutputChunk } from '../../src/runtime/container-runtime.js';
import { WARM_REQUEST_ID } from '../../src/engine/warm-up.js';

async function collect(chunks: OutputChunk[]): Promise<{ stdout: string; stderr: string }> {
  async function* source() {
    yield* chunks;
  }
  let stdout = '';
  let stderr = '';
  for await (const chunk of withoutWarmUp(source())) {
    if (chunk.stream === 'stdout') stdout += chunk.data.toString();
    else stderr += chunk.data.toString();
  }
  return { stdout, stderr };
}

const out = (text: string): OutputChunk => ({ stream: 'stdout', data: Buffer.from(text) });
const readyAnswer = '{"type":"control_response","response":{"subtype":"success","request_id":"berth-ready"}}\n';
const warmAnswer = `{"type":"control_response","response":{"subtype":"success","request_id":"${WARM_REQUEST_ID}"}}\n`;
const init = (n: number) => `{"type":"system","subtype":"init","session_id":"s","n":${n}}\n`;
const result = (index: number, text: string) => `{"type":"result","subtype":"success","is_error":false,"result":"${text}","result_index":${index}}\n`;

test('a pooled engine\'s log: the control answers and the blank turn are left out, the run\'s result numbered from 0', async () => {
  const log = readyAnswer + warmAnswer + init(1) + '{"type":"system","subtype":"notice","text":"blank prompt"}\n' + result(0, '') + init(2) + '{"type":"assistant","message":{}}\n' + result(1, 'the run');
  // Split at awkward places: mid-line, and the warm-up's result across chunks.
  const cut = [17, 130, log.indexOf('"result_index":0') + 3, log.length - 20];
  const chunks: OutputChunk[] = [];
  let from = 0;
  for (const at of [...cut, log.length]) {
    chunks.push(out(log.slice(from, at)));
    from = at;
  }
  chunks.splice(2, 0, { stream: 'stderr', data: Buffer.from('warning\n') });
  const { stdout, stderr } = await collect(chunks);
  assert.equal(stdout, init(2) + '{"type":"assistant","message":{}}\n' + result(0, 'the run'));
  assert.equal(stderr, 'warning\n');
});

test('a container made for its run passes unchanged, results included', async () => {
  const log = init(1) + result(0, 'only') + 'partial line without newline';
  const { stdout } = await collect([out(log.slice(0, 10)), out(log.slice(10))]);
  assert.equal(stdout, log);
});
