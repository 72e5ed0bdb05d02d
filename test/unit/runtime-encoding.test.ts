import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tarFiles } from '../../src/runtime/tar.js';
import { demultiplex } from '../../src/runtime/podman/multiplexed-stream.js';

test('tarFiles writes an archive that GNU tar extracts byte for byte', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-tar-'));
  try {
    const prompt = Buffer.from('héllo\n$(not a command)\n'.repeat(100), 'utf8');
    writeFileSync(join(dir, 'a.tar'), tarFiles([
      { path: 'input/prompt', content: prompt, mode: 0o444 },
      { path: 'input/empty', content: Buffer.alloc(0), mode: 0o444 },
    ]));
    execFileSync('tar', ['-xf', 'a.tar'], { cwd: dir });
    assert.deepEqual(readFileSync(join(dir, 'input/prompt')), prompt);
    assert.equal(readFileSync(join(dir, 'input/empty')).length, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

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
