import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { extractArchive } from '../../src/core/workspaces/archive-extract.js';
import { checkEntry, checkLinkTarget } from '../../src/core/workspaces/archive-entries.js';
import { parseWorkspacePath, ROOT_PATH } from '../../src/core/workspaces/workspace-paths.js';
import { scanTree } from '../../src/core/workspaces/tree-scan.js';
import { BerthError } from '../../src/errors.js';
import { tarOf, type TarItem as Item } from '../support/tar-entries.js';


async function workspace(options: { maxFiles?: number; maxBytes?: number } = {}) {
  const view = await mkdtemp(join(tmpdir(), 'berth-ws-x-'));
  await mkdir(join(view, 'tree'));
  await mkdir(join(view, '.berth', 'tmp'), { recursive: true, mode: 0o700 });
  return {
    id: '00000000-0000-4000-8000-000000000000',
    tree: join(view, 'tree'),
    internal: join(view, '.berth'),
    maxBytes: options.maxBytes ?? 64 * 1024 * 1024,
    maxFiles: options.maxFiles ?? 1000,
    fileOwner: { uid: 101000, gid: 101000 },
    fileCount: 0,
    cleanup: () => rm(view, { recursive: true, force: true }),
  };
}

async function refusal(promise: Promise<unknown>): Promise<BerthError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof BerthError) return error;
    throw error;
  }
  assert.fail('expected a refusal');
}

const extract = (ws: Awaited<ReturnType<typeof workspace>>, archive: Buffer, path = ROOT_PATH, ratio = 100) =>
  extractArchive(ws, path, Readable.from([archive]), { maxArchiveRatio: ratio });

test('entry names: relative names are normalised, absolute and ".." names are refused', () => {
  const context = { prefix: ['sub'] };
  assert.equal(checkEntry({ name: './src//a.txt', type: 'file', mode: 0o755 }, context)?.path, 'sub/src/a.txt');
  assert.equal(checkEntry({ name: './src//a.txt', type: 'file', mode: 0o755 }, context)?.mode, 0o755);
  assert.equal(checkEntry({ name: 'a', type: 'file', mode: 0o600 }, context)?.mode, 0o644);
  assert.equal(checkEntry({ name: './', type: 'directory' }, context), undefined);
  assert.throws(() => checkEntry({ name: '/etc/passwd', type: 'file' }, context), /archive entry "\/etc\/passwd": is an absolute path/);
  assert.throws(() => checkEntry({ name: 'a/../../x', type: 'file' }, context), /archive entry "a\/..\/..\/x": has a "\.\." segment/);
  assert.throws(() => checkEntry({ name: 'a\0b', type: 'file' }, context), /NUL/);
  assert.throws(() => checkEntry({ name: `${'x'.repeat(256)}`, type: 'file' }, context), /longer than 255/);
});

test('entry kinds: hard links, devices and FIFOs are refused; setuid and setgid bits are refused', () => {
  const context = { prefix: [] };
  assert.throws(() => checkEntry({ name: 'h', type: 'link', linkname: 'a' }, context), /archive entry "h": is a hard link/);
  assert.throws(() => checkEntry({ name: 'c', type: 'character-device' }, context), /archive entry "c": is a character device/);
  assert.throws(() => checkEntry({ name: 'b', type: 'block-device' }, context), /archive entry "b": is a block device/);
  assert.throws(() => checkEntry({ name: 'f', type: 'fifo' }, context), /archive entry "f": is a FIFO/);
  assert.throws(() => checkEntry({ name: 'u', type: null }, context), /archive entry "u": is of a kind/);
  assert.throws(() => checkEntry({ name: 's', type: 'file', mode: 0o4755 }, context), /archive entry "s": has the setuid bit/);
  assert.throws(() => checkEntry({ name: 'g', type: 'directory', mode: 0o2755 }, context), /archive entry "g": has the setgid bit/);
  assert.equal(checkEntry({ name: 't', type: 'directory', mode: 0o1777 }, context)?.mode, 0o755, 'the sticky bit is dropped');
});

test('link targets must resolve inside the workspace by their text', () => {
  assert.doesNotThrow(() => checkLinkTarget('a/b/l', ['a', 'b', 'l'], '../../x'));
  assert.doesNotThrow(() => checkLinkTarget('l', ['l'], 'x/y'));
  assert.doesNotThrow(() => checkLinkTarget('l', ['sub', 'l'], '../x'), 'the ?path= prefix counts as depth');
  assert.throws(() => checkLinkTarget('l', ['l'], '/etc'), /archive entry "l": is a symbolic link to the absolute path "\/etc"/);
  assert.throws(() => checkLinkTarget('a/l', ['a', 'l'], '../../'), /points outside the workspace/);
  assert.throws(() => checkLinkTarget('l', ['l'], 'd/b/..'), /has "\.\." after a name/);
  assert.throws(() => checkLinkTarget('l', ['l'], ''), /without a target/);
});

test('a valid archive lands in the tree with normalised modes, the file owner, and links as links', async () => {
  const ws = await workspace();
  try {
    const archive = await tarOf([
      { name: './', type: 'directory', mode: 0o777 },
      { name: 'src/', type: 'directory', mode: 0o700 },
      { name: 'src/run.sh', content: '#!/bin/sh\n', mode: 0o700 },
      { name: 'src/a.txt', content: 'hello\n', mode: 0o666 },
      { name: 'link', type: 'symlink', linkname: 'src/a.txt' },
      { name: 'deep/er/file', content: 'x' },
    ]);
    const result = await extract(ws, gzipSync(archive));
    assert.deepEqual(result, { files: 3, bytes: 10 + 6 + 1 });
    assert.equal(await readFile(join(ws.tree, 'src/a.txt'), 'utf8'), 'hello\n');
    assert.equal((await lstat(join(ws.tree, 'src/run.sh'))).mode & 0o7777, 0o755);
    assert.equal((await lstat(join(ws.tree, 'src/a.txt'))).mode & 0o7777, 0o644);
    assert.equal((await lstat(join(ws.tree, 'src'))).mode & 0o7777, 0o755);
    assert.equal((await lstat(join(ws.tree, 'deep/er'))).mode & 0o7777, 0o755);
    assert.equal((await lstat(join(ws.tree, 'src/a.txt'))).uid, 101000);
    assert.equal((await lstat(join(ws.tree, 'link'))).uid, 101000);
    assert.equal(await readlink(join(ws.tree, 'link')), 'src/a.txt');
    assert.deepEqual(await readdir(join(ws.internal, 'tmp')), [], 'nothing left in .berth/tmp');
  } finally {
    await ws.cleanup();
  }
});

test('?path= puts the archive below a subdirectory, merging with what is there and replacing files', async () => {
  const ws = await workspace();
  try {
    await mkdir(join(ws.tree, 'sub/keep'), { recursive: true });
    await writeFile(join(ws.tree, 'sub/keep/old.txt'), 'old');
    await writeFile(join(ws.tree, 'sub/replace.txt'), 'before');
    const archive = await tarOf([{ name: 'replace.txt', content: 'after' }, { name: 'keep/new.txt', content: 'new' }]);
    await extract(ws, archive, parseWorkspacePath('sub', { allowRoot: true }));
    assert.equal(await readFile(join(ws.tree, 'sub/replace.txt'), 'utf8'), 'after');
    assert.equal(await readFile(join(ws.tree, 'sub/keep/old.txt'), 'utf8'), 'old');
    assert.equal(await readFile(join(ws.tree, 'sub/keep/new.txt'), 'utf8'), 'new');
  } finally {
    await ws.cleanup();
  }
});

for (const [kind, items, pattern] of [
  ['an absolute path', [{ name: 'ok.txt', content: 'x' }, { name: '/abs.txt', content: 'x' }], /archive entry "\/abs.txt"/],
  ['a ".." path', [{ name: 'ok.txt', content: 'x' }, { name: '../x', content: 'x' }], /archive entry "\.\.\/x"/],
  ['a link to /etc', [{ name: 'ok.txt', content: 'x' }, { name: 'etc', type: 'symlink', linkname: '/etc' }], /archive entry "etc"/],
  ['a link to ../../', [{ name: 'ok.txt', content: 'x' }, { name: 'up', type: 'symlink', linkname: '../../' }], /archive entry "up"/],
  ['a hard link', [{ name: 'ok.txt', content: 'x' }, { name: 'hard', type: 'link', linkname: 'ok.txt' }], /archive entry "hard"/],
  ['a file below a link of the archive', [{ name: 'd', type: 'symlink', linkname: 'x' }, { name: 'd/f', content: 'x' }], /archive entry "d\/f": lies below "d"/],
] as const) {
  test(`an archive with ${kind} is refused naming the entry, and nothing of it is written`, async () => {
    const ws = await workspace();
    try {
      const error = await refusal(extract(ws, await tarOf(items as unknown as Item[])));
      assert.equal(error.status, 400);
      assert.match(error.message, pattern);
      assert.deepEqual(await scanTree(ws.tree), []);
      assert.deepEqual(await readdir(join(ws.internal, 'tmp')), []);
    } finally {
      await ws.cleanup();
    }
  });
}

test('an archive that expands past the ratio is refused naming the entry', async () => {
  const ws = await workspace();
  try {
    const bomb = gzipSync(await tarOf([{ name: 'zeros', content: Buffer.alloc(8 * 1024 * 1024) }]));
    const error = await refusal(extract(ws, bomb, ROOT_PATH, 100));
    assert.equal(error.status, 400);
    assert.match(error.message, /archive entry "zeros": unpacks the archive past 100 times/);
    assert.deepEqual(await scanTree(ws.tree), []);
  } finally {
    await ws.cleanup();
  }
});

test('more entries than maxFiles is a 400 naming the entry; more bytes than maxBytes a 413', async () => {
  const ws = await workspace({ maxFiles: 3, maxBytes: 1000 });
  try {
    const many = await tarOf(['a', 'b', 'c', 'd'].map((name) => ({ name, content: 'x' })));
    const tooMany = await refusal(extract(ws, many));
    assert.equal(tooMany.status, 400);
    assert.match(tooMany.message, /archive entry "d": the archive has more than 3 entries/);
    const big = await tarOf([{ name: 'big', content: Buffer.alloc(2000, 1) }]);
    const tooBig = await refusal(extract(ws, big));
    assert.equal(tooBig.status, 413);
    assert.deepEqual(await scanTree(ws.tree), []);
  } finally {
    await ws.cleanup();
  }
});

test('a path through a link in the tree, or a directory against a file, is refused before anything moves', async () => {
  const ws = await workspace();
  try {
    await symlink('/etc', join(ws.tree, 'planted'));
    await mkdir(join(ws.tree, 'dir'));
    const through = await refusal(extract(ws, await tarOf([{ name: 'aaa.txt', content: 'x' }, { name: 'planted/x', content: 'x' }])));
    assert.equal(through.status, 400);
    assert.match(through.message, /planted/);
    const conflict = await refusal(extract(ws, await tarOf([{ name: 'aaa.txt', content: 'x' }, { name: 'dir', content: 'x' }])));
    assert.match(conflict.message, /archive entry "dir": is a file in the archive and a directory in the workspace/);
    assert.deepEqual((await scanTree(ws.tree)).map((entry) => entry.path), ['dir', 'planted']);
  } finally {
    await ws.cleanup();
  }
});

test('bodies that are not tar archives are a 400', async () => {
  const ws = await workspace();
  try {
    assert.match((await refusal(extract(ws, Buffer.from('not a tar at all'.repeat(100))))).message, /archive: not a valid tar archive/);
    assert.match((await refusal(extract(ws, Buffer.from([0x1f, 0x8b, 1, 2, 3, 4])))).message, /archive: not valid gzip data/);
    assert.match((await refusal(extract(ws, Buffer.alloc(0)))).message, /empty/);
  } finally {
    await ws.cleanup();
  }
});
