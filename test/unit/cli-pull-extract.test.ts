// How `berth pull` (the SDK's downloadDirectory) unpacks a workspace's archive: as hostile. Each archive
// below is hand-made, header by header, the way a compromised server or a planted file could shape it; every
// one must be refused whole, naming the entry, with nothing written in the target nor outside it.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Header, type HeaderData } from 'tar';
import { extractArchive, UnsafeArchiveError } from '../../packages/client/src/extract-archive.js';

interface Entry extends Partial<HeaderData> {
  readonly path: string;
  readonly body?: string;
}

/** A tar archive of exactly these headers and bodies (gzipped unless `plain`). */
function tarball(entries: readonly Entry[], plain = false): Buffer {
  const blocks: Buffer[] = [];
  for (const { body = '', ...fields } of entries) {
    const content = Buffer.from(body);
    const header = new Header({ mode: 0o644, mtime: new Date(0), type: 'File', size: content.length, ...fields });
    header.encode();
    blocks.push(header.block!);
    if (content.length > 0) blocks.push(content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  const tar = Buffer.concat(blocks);
  return plain ? tar : gzipSync(tar);
}

async function* chunks(buffer: Buffer): AsyncGenerator<Uint8Array> {
  // Small chunks, as a network delivers them.
  for (let offset = 0; offset < buffer.length; offset += 1000) yield buffer.subarray(offset, offset + 1000);
}

describe('unpacking a workspace archive (berth pull)', () => {
  let root: string;
  let outside: string;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-pull-'));
    outside = join(root, 'outside');
    await mkdir(outside);
  });
  after(() => rm(root, { recursive: true, force: true }));

  it('unpacks files, directories and links that stay inside into a new directory', async () => {
    const target = join(root, 'good');
    const result = await extractArchive(
      chunks(
        tarball([
          { path: 'src/', type: 'Directory', mode: 0o755 },
          { path: 'src/calc.js', body: 'module.exports = (a, b) => a + b;\n' },
          { path: './test.js', body: 'test\n', mode: 0o755 },
          { path: 'src/link', type: 'SymbolicLink', linkpath: '../test.js' },
        ]),
      ),
      target,
    );
    assert.deepEqual(result, { files: 2, directories: 1, links: 1, bytes: 39 });
    assert.equal(await readFile(join(target, 'src/calc.js'), 'utf8'), 'module.exports = (a, b) => a + b;\n');
    assert.equal(await readlink(join(target, 'src/link')), '../test.js');
    assert.equal((await lstat(join(target, 'test.js'))).mode & 0o777, 0o755);
    assert.deepEqual((await readdir(root)).sort(), ['good', 'outside'], 'no staging directory is left');
  });

  it('takes a plain (not gzipped) tar too, with its root as ./, and an empty directory as target', async () => {
    const target = join(root, 'plain');
    await mkdir(target);
    await extractArchive(chunks(tarball([{ path: './', type: 'Directory', mode: 0o755 }, { path: 'a.txt', body: 'a' }], true)), target);
    assert.equal(await readFile(join(target, 'a.txt'), 'utf8'), 'a');
  });

  const hostile: ReadonlyArray<readonly [what: string, entries: Entry[], entry: string, reason: RegExp]> = [
    ['an absolute path', [{ path: 'ok.txt', body: 'x' }, { path: '/tmp/berth-pwned', body: 'x' }], '/tmp/berth-pwned', /absolute/],
    ['a .. segment', [{ path: '../outside/pwned', body: 'x' }], '../outside/pwned', /"\.\."/],
    ['a .. segment deeper down', [{ path: 'a/../../outside/pwned', body: 'x' }], 'a/../../outside/pwned', /"\.\."/],
    ['a symbolic link to an absolute path', [{ path: 'etc', type: 'SymbolicLink', linkpath: '/etc' }], 'etc', /pointing outside/],
    ['a symbolic link climbing out', [{ path: 'a/up', type: 'SymbolicLink', linkpath: '../../outside' }], 'a/up', /pointing outside/],
    [
      'a file written through a link of the same archive',
      [
        { path: 'sub/', type: 'Directory', mode: 0o755 },
        { path: 'in', type: 'SymbolicLink', linkpath: 'sub' },
        { path: 'in/x', body: 'x' },
      ],
      'in/x',
      /beneath the symbolic link/,
    ],
    ['a link replaced by a directory', [{ path: 'l', type: 'SymbolicLink', linkpath: 'x' }, { path: 'l/', type: 'Directory', mode: 0o755 }], 'l/', /replaces a symbolic link/],
    ['a hard link', [{ path: 'passwd', type: 'Link', linkpath: '/etc/passwd' }], 'passwd', /hard link/],
    ['a character device', [{ path: 'null', type: 'CharacterDevice', devmaj: 1, devmin: 3 }], 'null', /CharacterDevice/],
    ['a block device', [{ path: 'sda', type: 'BlockDevice', devmaj: 8, devmin: 0 }], 'sda', /BlockDevice/],
    ['a FIFO', [{ path: 'fifo', type: 'FIFO' }], 'fifo', /FIFO/],
    ['a setuid file', [{ path: 'su', body: 'x', mode: 0o4755 }], 'su', /setuid/],
    ['a setgid directory', [{ path: 'g/', type: 'Directory', mode: 0o2755 }], 'g/', /setuid or setgid/],
  ];

  for (const [what, entries, entry, reason] of hostile) {
    it(`refuses an archive with ${what}, naming the entry, and writes nothing`, async () => {
      const target = join(root, 'hostile');
      await assert.rejects(extractArchive(chunks(tarball([{ path: 'first.txt', body: 'first' }, ...entries])), target), (error: unknown) => {
        assert.ok(error instanceof UnsafeArchiveError, String(error));
        assert.equal(error.entry, entry);
        assert.match(error.reason, reason);
        return true;
      });
      assert.deepEqual((await readdir(root)).sort(), ['good', 'outside', 'plain'], 'neither the target nor a staging directory exists');
      assert.deepEqual(await readdir(outside), []);
      await assert.rejects(lstat('/tmp/berth-pwned'), { code: 'ENOENT' });
    });
  }

  it('refuses to unpack into a directory that is not empty', async () => {
    const target = join(root, 'plain');
    await assert.rejects(extractArchive(chunks(tarball([{ path: 'b.txt', body: 'b' }])), target), /not empty/);
    assert.deepEqual(await readdir(target), ['a.txt']);
  });

  it('refuses a truncated archive and leaves nothing', async () => {
    const whole = tarball([{ path: 'big.txt', body: 'x'.repeat(5000) }], true);
    await assert.rejects(extractArchive(chunks(whole.subarray(0, 2048)), join(root, 'cut')));
    assert.deepEqual((await readdir(root)).sort(), ['good', 'outside', 'plain']);
  });

  it('writes nothing through a link that a hostile archive plants before its checks would see it', async () => {
    // The link and the write through it are in one archive: the check refuses before the unpack starts.
    await writeFile(join(outside, 'keep'), 'keep');
    const target = join(root, 'through');
    await assert.rejects(
      extractArchive(chunks(tarball([{ path: 'out', type: 'SymbolicLink', linkpath: '../outside' }, { path: 'out/keep', body: 'overwritten' }])), target),
      UnsafeArchiveError,
    );
    assert.equal(await readFile(join(outside, 'keep'), 'utf8'), 'keep');
    await rm(join(outside, 'keep'));
  });
});
