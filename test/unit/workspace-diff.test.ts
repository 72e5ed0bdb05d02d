import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, utimes, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { takeCheckpoint } from '../../src/core/workspaces/checkpoints.js';
import { diffWorkspace, sideOf } from '../../src/core/workspaces/workspace-diff.js';

async function workspace() {
  const view = await mkdtemp(join(tmpdir(), 'berth-ws-diff-'));
  await mkdir(join(view, 'tree'));
  await mkdir(join(view, '.berth'), { mode: 0o700 });
  return { tree: join(view, 'tree'), internal: join(view, '.berth'), cleanup: () => rm(view, { recursive: true, force: true }) };
}

const limits = { diffMaxFileBytes: 1024, maxDiffBytes: 1024 * 1024 };

test('no checkpoint yet: no diff', async () => {
  const ws = await workspace();
  try {
    assert.equal(await diffWorkspace(ws, 'last_run', limits), undefined);
  } finally {
    await ws.cleanup();
  }
});

test('added, changed and removed files, a unified diff of the text ones, binary and large files listed only', async () => {
  const ws = await workspace();
  try {
    await mkdir(join(ws.tree, 'src'));
    await writeFile(join(ws.tree, 'src/app.js'), 'one\ntwo\nthree\n');
    await writeFile(join(ws.tree, 'gone.txt'), 'bye\n');
    await writeFile(join(ws.tree, 'same.txt'), 'same\n');
    await writeFile(join(ws.tree, 'touched.txt'), 'touched\n');
    await writeFile(join(ws.tree, 'image.bin'), Buffer.from([1, 0, 2]));
    await writeFile(join(ws.tree, 'big.txt'), 'x'.repeat(2000));
    await symlink('src/app.js', join(ws.tree, 'link'));
    await takeCheckpoint(ws, 'upload', { diffMaxFileBytes: limits.diffMaxFileBytes });

    await writeFile(join(ws.tree, 'src/app.js'), 'one\nTWO\nthree\n');
    await rm(join(ws.tree, 'gone.txt'));
    await writeFile(join(ws.tree, 'new.txt'), 'hello\n');
    await writeFile(join(ws.tree, 'image.bin'), Buffer.from([1, 0, 3]));
    await writeFile(join(ws.tree, 'big.txt'), 'y'.repeat(2000));
    await utimes(join(ws.tree, 'touched.txt'), new Date(), new Date(Date.now() + 5000));
    await rm(join(ws.tree, 'link'));
    await symlink('elsewhere', join(ws.tree, 'link'));
    await writeFile(join(ws.tree, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));

    const diff = await diffWorkspace(ws, 'upload', limits);
    assert.ok(diff);
    assert.equal(diff.since, 'upload');
    assert.deepEqual(diff.added, ['latin1.txt', 'new.txt']);
    assert.deepEqual(diff.changed, ['big.txt', 'image.bin', 'link', 'src/app.js']);
    assert.deepEqual(diff.removed, ['gone.txt']);
    assert.deepEqual(diff.binary, ['image.bin', 'latin1.txt']);
    assert.deepEqual(diff.too_large, ['big.txt']);
    assert.equal(diff.truncated, false);
    assert.match(diff.diff, /diff --git a\/src\/app.js b\/src\/app.js\n--- a\/src\/app.js\n\+\+\+ b\/src\/app.js\n@@ -1,3 \+1,3 @@\n one\n-two\n\+TWO\n three\n/);
    assert.match(diff.diff, /diff --git a\/new.txt b\/new.txt\nnew file mode 100644\n--- \/dev\/null\n\+\+\+ b\/new.txt\n@@ -0,0 \+1,1 @@\n\+hello\n/);
    assert.match(diff.diff, /diff --git a\/gone.txt b\/gone.txt\ndeleted file mode 100644\n--- a\/gone.txt\n\+\+\+ \/dev\/null\n/);
    assert.doesNotMatch(diff.diff, /image.bin|big.txt|touched|same.txt/);
  } finally {
    await ws.cleanup();
  }
});

test('a mode change is a change; the diff text is cut at its budget and says so', async () => {
  const ws = await workspace();
  try {
    await writeFile(join(ws.tree, 'run.sh'), 'echo\n');
    for (let i = 0; i < 20; i++) await writeFile(join(ws.tree, `f${i}.txt`), 'a\n');
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 });
    await chmod(join(ws.tree, 'run.sh'), 0o755);
    for (let i = 0; i < 20; i++) await writeFile(join(ws.tree, `f${i}.txt`), 'b\n');
    const diff = await diffWorkspace(ws, 'last_run', { diffMaxFileBytes: 1024, maxDiffBytes: 500 });
    assert.ok(diff);
    assert.ok(diff.changed.includes('run.sh'));
    assert.equal(diff.changed.length, 21, 'the lists stay complete');
    assert.equal(diff.truncated, true);
    assert.ok(Buffer.byteLength(diff.diff) <= 500);
  } finally {
    await ws.cleanup();
  }
});

test('text is valid UTF-8 without NUL bytes', () => {
  assert.equal(sideOf(Buffer.from('héllo\n')).kind, 'text');
  assert.equal(sideOf(Buffer.from([0x68, 0, 0x69])).kind, 'binary');
  assert.equal(sideOf(Buffer.from([0xff, 0xfe])).kind, 'binary');
});
