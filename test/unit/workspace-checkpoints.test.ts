import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { readCheckpoint, takeCheckpoint } from '../../src/core/workspaces/checkpoints.js';

async function workspace(): Promise<{ tree: string; internal: string; cleanup: () => Promise<void> }> {
  const view = await mkdtemp(join(tmpdir(), 'berth-ws-cp-'));
  await mkdir(join(view, 'tree'));
  await mkdir(join(view, '.berth'), { mode: 0o700 });
  return { tree: join(view, 'tree'), internal: join(view, '.berth'), cleanup: () => rm(view, { recursive: true, force: true }) };
}

test('a checkpoint records every entry and keeps the content of small regular files only', async () => {
  const ws = await workspace();
  try {
    await mkdir(join(ws.tree, 'src'));
    await writeFile(join(ws.tree, 'src/a.txt'), 'hello\n');
    await writeFile(join(ws.tree, 'big.bin'), Buffer.alloc(2048, 1));
    await symlink('/etc/passwd', join(ws.tree, 'link'));
    execFileSync('mkfifo', [join(ws.tree, 'fifo')]);
    const summary = await takeCheckpoint(ws, 'upload', { diffMaxFileBytes: 1024 });
    assert.equal(summary.entries, 5);
    assert.equal(summary.kept, 1);
    const checkpoint = await readCheckpoint(ws, 'upload');
    assert.ok(checkpoint);
    assert.deepEqual([...checkpoint.entries.keys()], ['big.bin', 'fifo', 'link', 'src', 'src/a.txt']);
    assert.equal(checkpoint.entries.get('link')?.type, 'symlink');
    assert.equal(checkpoint.entries.get('link')?.target, '/etc/passwd');
    assert.equal(checkpoint.entries.get('fifo')?.type, 'other');
    assert.equal(checkpoint.entries.get('big.bin')?.content, undefined);
    assert.equal(await checkpoint.readContent(checkpoint.entries.get('big.bin')!), undefined);
    assert.equal((await checkpoint.readContent(checkpoint.entries.get('src/a.txt')!))?.toString(), 'hello\n');
    await checkpoint.close();
  } finally {
    await ws.cleanup();
  }
});

test('taking a checkpoint again replaces it whole and leaves nothing beside it', async () => {
  const ws = await workspace();
  try {
    await writeFile(join(ws.tree, 'same.txt'), 'same\n');
    await writeFile(join(ws.tree, 'gone.txt'), 'gone\n');
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 });
    const first = await readCheckpoint(ws, 'last_run');
    await rm(join(ws.tree, 'gone.txt'));
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 });
    const second = await readCheckpoint(ws, 'last_run');
    assert.ok(first && second);
    assert.deepEqual([...second.entries.keys()], ['same.txt']);
    assert.equal((await second.readContent(second.entries.get('same.txt')!))?.toString(), 'same\n');
    assert.equal((await first.readContent(first.entries.get('gone.txt')!))?.toString(), 'gone\n', 'a reader of the old checkpoint still reads the old one');
    await first.close();
    await second.close();
    assert.deepEqual((await readdir(join(ws.internal, 'checkpoints'))).sort(), ['last_run'], 'no build or old copy left beside it');
    assert.equal(await readCheckpoint(ws, 'upload'), undefined);
  } finally {
    await ws.cleanup();
  }
});

test('a checkpoint of 1,000 small files takes a fraction of a second (bounded at 3 s for a loaded machine)', async () => {
  const ws = await workspace();
  try {
    for (let d = 0; d < 10; d++) {
      await mkdir(join(ws.tree, `d${d}`));
      await Promise.all(Array.from({ length: 100 }, (_, f) => writeFile(join(ws.tree, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`.repeat(20))));
    }
    let started = performance.now();
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 * 1024 });
    const cold = performance.now() - started;
    started = performance.now();
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 * 1024 });
    const warm = performance.now() - started;
    console.log(`checkpoint of 1,010 entries: first ${cold.toFixed(0)} ms, again ${warm.toFixed(0)} ms`);
    assert.ok(cold < 3000 && warm < 3000);
  } finally {
    await ws.cleanup();
  }
});

test('content is taken from an earlier checkpoint only for files unchanged since (a rewrite with the same size and mtime is read again)', async () => {
  const ws = await workspace();
  try {
    await writeFile(join(ws.tree, 'same.txt'), 'same\n');
    await writeFile(join(ws.tree, 'sneaky.txt'), 'aaaa\n');
    const { utimes } = await import('node:fs/promises');
    await utimes(join(ws.tree, 'sneaky.txt'), 1_000_000, 1_000_000); // whole seconds: set back exactly below
    await takeCheckpoint(ws, 'upload', { diffMaxFileBytes: 1024 });
    await writeFile(join(ws.tree, 'sneaky.txt'), 'bbbb\n');
    await utimes(join(ws.tree, 'sneaky.txt'), 1_000_000, 1_000_000); // mtime put back; ctime cannot be
    await takeCheckpoint(ws, 'last_run', { diffMaxFileBytes: 1024 });
    const checkpoint = await readCheckpoint(ws, 'last_run');
    assert.ok(checkpoint);
    assert.equal((await checkpoint.readContent(checkpoint.entries.get('sneaky.txt')!))?.toString(), 'bbbb\n');
    assert.equal((await checkpoint.readContent(checkpoint.entries.get('same.txt')!))?.toString(), 'same\n');
    await checkpoint.close();
  } finally {
    await ws.cleanup();
  }
});
