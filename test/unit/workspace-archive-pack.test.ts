import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, chown, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { packDirectory } from '../../src/core/workspaces/archive-pack.js';

test('an archive of a tree: uid/gid 0 without names, permission bits only, links as links, special files left out', async () => {
  const root = await mkdtemp(join(tmpdir(), 'berth-ws-pack-'));
  try {
    await mkdir(join(root, 'src'));
    await writeFile(join(root, 'src/a.txt'), 'hello\n');
    await writeFile(join(root, 'tool'), 'x'.repeat(200_000));
    await chmod(join(root, 'tool'), 0o4755);
    await chown(join(root, 'src/a.txt'), 101000, 101000);
    await symlink('/etc/passwd', join(root, 'link'));
    execFileSync('mkfifo', [join(root, 'fifo')]);
    const parser = extract();
    packDirectory(root).pipe(createGunzip()).pipe(parser as unknown as NodeJS.WritableStream);
    const seen: Record<string, { type: string; mode: number; uid: number; gid: number; uname: string; linkname: string | null; bytes: number }> = {};
    for await (const entry of parser) {
      let bytes = 0;
      for await (const chunk of entry) bytes += (chunk as Buffer).length;
      const h = entry.header;
      seen[h.name] = { type: h.type, mode: h.mode, uid: h.uid, gid: h.gid, uname: h.uname, linkname: h.linkname, bytes };
    }
    assert.deepEqual(Object.keys(seen).sort(), ['link', 'src', 'src/a.txt', 'tool']);
    assert.deepEqual(seen['src/a.txt'], { type: 'file', mode: 0o644, uid: 0, gid: 0, uname: '', linkname: null, bytes: 6 });
    assert.equal(seen['tool']?.mode, 0o755, 'setuid is not recorded');
    assert.equal(seen['tool']?.bytes, 200_000);
    assert.equal(seen['link']?.type, 'symlink');
    assert.equal(seen['link']?.linkname, '/etc/passwd', 'the link itself, never what it points to');
    assert.equal(seen['src']?.type, 'directory');
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('a download the client abandons stops reading and closes its files', async () => {
  const root = await mkdtemp(join(tmpdir(), 'berth-ws-pack-'));
  const openInRoot = async () => {
    const { readdir: list, readlink } = await import('node:fs/promises');
    const targets = await Promise.all((await list('/proc/self/fd')).map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
    return targets.filter((target) => target.startsWith(root));
  };
  try {
    // Random bytes: gzip cannot shrink them, so the stream fills its buffers and the walk waits on 'drain'.
    const { randomBytes } = await import('node:crypto');
    await writeFile(join(root, 'big.bin'), randomBytes(8 * 1024 * 1024));
    const archive = packDirectory(root);
    await new Promise<void>((resolve) => archive.once('data', () => resolve()));
    archive.pause();
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok((await openInRoot()).length > 0, 'the file is open while the walk waits for the reader');
    archive.destroy();
    const deadline = Date.now() + 5000;
    while ((await openInRoot()).length > 0) {
      assert.ok(Date.now() < deadline, 'the file was closed after the reader went away');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
