// Hostile archives uploaded into a workspace, performed for real against a Berth on real Podman and real
// loop-mounted workspace disks: each kind is refused with the right status naming the entry, and nothing of
// the archive lands in the tree (listed through the API before and after). Then what a caller relies on:
// a tar.gz round-trips with its bytes and modes and no host uid, a diff shows a changed text file and lists a
// binary one, and an upload waits for no run: it is refused (409) while a run holds the workspace.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createGunzip, gzipSync } from 'node:zlib';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { extract } from 'tar-stream';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { tarOf, type TarItem as Item } from '../support/tar-entries.js';

const exec = promisify(execFile);


interface ArchivedEntry {
  type: string;
  mode: number;
  uid: number;
  gid: number;
  uname: string;
  gname: string;
  linkname: string | null;
  content: Buffer;
}

async function entriesOf(tarGz: Buffer): Promise<Map<string, ArchivedEntry>> {
  const parser = extract();
  Readable.from([tarGz]).pipe(createGunzip()).pipe(parser as unknown as NodeJS.WritableStream);
  const entries = new Map<string, ArchivedEntry>();
  for await (const entry of parser) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    const h = entry.header;
    entries.set(h.name, { type: h.type, mode: h.mode, uid: h.uid, gid: h.gid, uname: h.uname, gname: h.gname, linkname: h.linkname, content: Buffer.concat(chunks) });
  }
  return entries;
}

describe('archives uploaded into a workspace', () => {
  let t: TestBerth;
  let workspace: string;

  const upload = async (archive: Buffer, path?: string, id = workspace) => {
    const response = await fetch(`${t.url}/workspaces/${id}/archive${path === undefined ? '' : `?path=${encodeURIComponent(path)}`}`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(archive),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const download = async (path?: string) => {
    const response = await fetch(`${t.url}/workspaces/${workspace}/archive${path === undefined ? '' : `?path=${encodeURIComponent(path)}`}`);
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get('content-type'), 'application/gzip');
    return Buffer.from(await response.arrayBuffer());
  };
  /** What is left in the workspace's `.berth/tmp` (uploads and staging), read on the host while its disk is mounted. */
  const leftInTmp = async (id = workspace) => readdir(join(t.config.agent.sessionsDir, '.workspaces', id, '.berth', 'tmp'));
  /** The tree as the API shows it: every path in a download of the whole workspace. */
  const treeListing = async () => [...(await entriesOf(await download())).keys()].sort();

  before(async () => {
    t = await startTestBerth({
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
      SERVICE_WORKSPACE_MAX_BYTES: '64m',
      SERVICE_WORKSPACE_MAX_FILES: '200',
      SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO: '100',
    });
    const created = await t.request('POST', '/workspaces', {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    workspace = created.body.id;
    const seeded = await upload(gzipSync(await tarOf([{ name: 'existing/kept.txt', content: 'kept\n' }])));
    assert.equal(seeded.status, 200, JSON.stringify(seeded.body));
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    const dir = t?.dir;
    await t?.stop();
    if (dir === undefined) return;
    // Every workspace disk of this Berth is unmounted and detached at its stop.
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((line) => line.includes(`${dir}/`));
    assert.deepEqual(mounts, [], 'no workspace disk left mounted');
    const loops = (await exec('losetup', ['-a'])).stdout.split('\n').filter((line) => line.includes(`${dir}/`));
    assert.deepEqual(loops, [], 'no loop device left attached');
  });

  const benign: Item = { name: 'benign.txt', content: 'written before the bad entry\n' };
  const hostile: [string, Item, RegExp][] = [
    ['an absolute path', { name: '/etc/cron.d/evil', content: '* * * * * root id\n' }, /archive entry "\/etc\/cron.d\/evil": is an absolute path/],
    ['a ".." path', { name: '../x', content: 'escaped' }, /archive entry "\.\.\/x": has a "\.\." segment/],
    ['a ".." path in the middle', { name: 'a/../../x', content: 'escaped' }, /archive entry "a\/\.\.\/\.\.\/x": has a "\.\." segment/],
    ['a symlink to /etc', { name: 'etc', type: 'symlink', linkname: '/etc' }, /archive entry "etc": is a symbolic link to the absolute path "\/etc"/],
    ['a symlink to ../../', { name: 'sub/up', type: 'symlink', linkname: '../../' }, /archive entry "sub\/up": is a symbolic link to "\.\.\/\.\.\/", which points outside/],
    ['a hard link', { name: 'hard', type: 'link', linkname: 'benign.txt' }, /archive entry "hard": is a hard link/],
    ['a character device', { name: 'null', type: 'character-device' }, /archive entry "null": is a character device/],
    ['a block device', { name: 'disk', type: 'block-device' }, /archive entry "disk": is a block device/],
    ['a FIFO', { name: 'pipe', type: 'fifo' }, /archive entry "pipe": is a FIFO/],
    ['a setuid file', { name: 'suid', content: '#!/bin/sh\n', mode: 0o4755 }, /archive entry "suid": has the setuid bit/],
    ['a setgid directory', { name: 'sgid/', type: 'directory', mode: 0o2775 }, /archive entry "sgid\/": has the setgid bit/],
  ];
  for (const [kind, item, message] of hostile) {
    test(`an archive with ${kind} is refused (400 naming the entry) and nothing of it is written`, async () => {
      const before = await treeListing();
      const refused = await upload(gzipSync(await tarOf([benign, item])));
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      assert.equal(refused.body.status, 'error');
      assert.match(String(refused.body.error), message);
      assert.deepEqual(await treeListing(), before);
      assert.deepEqual(await leftInTmp(), [], 'the uploaded archive is removed');
    });
  }

  test('an archive that expands past SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO (a zip bomb) is refused naming the entry', async () => {
    const before = await treeListing();
    const bomb = gzipSync(await tarOf([benign, { name: 'zeros.bin', content: Buffer.alloc(48 * 1024 * 1024) }]), { level: 9 });
    assert.ok(bomb.length < 100 * 1024, `the bomb is small (${bomb.length} bytes)`);
    const refused = await upload(bomb);
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(String(refused.body.error), /archive entry "zeros.bin": unpacks the archive past 100 times its uploaded size/);
    assert.deepEqual(await treeListing(), before);
  });

  test('an archive with more entries than SERVICE_WORKSPACE_MAX_FILES is refused naming the first one past it', async () => {
    const before = await treeListing();
    const many = await tarOf(Array.from({ length: 201 }, (_, i) => ({ name: `many/f${i}`, content: '' })));
    const refused = await upload(gzipSync(many));
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(String(refused.body.error), /archive entry "many\/f200": the archive has more than 200 entries/);
    assert.deepEqual(await treeListing(), before);
  });

  test('an archive whose files do not fit the workspace disk is refused with 413 and the tree is untouched', async () => {
    const before = await treeListing();
    // Declared 60 MB < SERVICE_WORKSPACE_MAX_BYTES (64 MiB), so pass 1 lets it through; the disk (which also
    // holds the upload itself) fills while it is staged.
    const lines = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => `line ${i} of a file that compresses about fivefold\n`).join(''));
    const part = lines(400_000);
    const archive = gzipSync(await tarOf([benign, { name: 'a.txt', content: part }, { name: 'b.txt', content: part }, { name: 'existing/kept.txt', content: part }]));
    const refused = await upload(archive);
    assert.equal(refused.status, 413, JSON.stringify(refused.body));
    assert.match(String(refused.body.error), /is full/);
    assert.deepEqual(await treeListing(), before);
    assert.deepEqual(await leftInTmp(), [], 'the upload and the staging directory are removed');
    const kept = await fetch(`${t.url}/workspaces/${workspace}/files/existing/kept.txt`);
    assert.equal(await kept.text(), 'kept\n', 'a file the archive would have replaced is as it was');
    // The space is given back: a small upload fits again.
    assert.equal((await upload(await tarOf([{ name: 'small/after-full.txt', content: 'ok' }]))).status, 200);
  });

  test('an entry below a link already in the workspace is refused: links are never followed', async () => {
    const placed = await upload(await tarOf([{ name: 'real/', type: 'directory' }, { name: 'inside', type: 'symlink', linkname: 'real' }]));
    assert.equal(placed.status, 200, JSON.stringify(placed.body));
    const before = await treeListing();
    const through = await upload(await tarOf([benign, { name: 'inside/x.txt', content: 'through a link' }]));
    assert.equal(through.status, 400, JSON.stringify(through.body));
    assert.match(String(through.body.error), /archive entry "inside": is a directory in the archive and a symlink in the workspace|lies below a symbolic link/);
    const viaPath = await upload(await tarOf([benign]), 'inside');
    assert.equal(viaPath.status, 400, JSON.stringify(viaPath.body));
    assert.deepEqual(await treeListing(), before);
  });

  test('a tar.gz round-trips: same bytes and modes, uid/gid 0 and no user names in the download', async () => {
    const binary = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));
    const items: Item[] = [
      { name: 'round/', type: 'directory', mode: 0o750 },
      { name: 'round/run.sh', content: '#!/bin/sh\necho hi\n', mode: 0o700 },
      { name: 'round/data.bin', content: binary, mode: 0o640 },
      { name: 'round/nested/deep.txt', content: 'deep\n' },
      { name: 'round/link', type: 'symlink', linkname: 'nested/deep.txt' },
    ];
    const uploaded = await upload(gzipSync(await tarOf(items)));
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    assert.deepEqual(uploaded.body, { files: 3, bytes: 18 + 70_000 + 5 });
    const got = await entriesOf(await download('round'));
    assert.deepEqual([...got.keys()].sort(), ['data.bin', 'link', 'nested', 'nested/deep.txt', 'run.sh']);
    assert.deepEqual(got.get('data.bin')?.content, binary);
    assert.equal(got.get('run.sh')?.content.toString(), '#!/bin/sh\necho hi\n');
    assert.equal(got.get('run.sh')?.mode, 0o755, 'an executable stays executable (normalised to 0755)');
    assert.equal(got.get('data.bin')?.mode, 0o644, 'others are 0644');
    assert.equal(got.get('nested')?.mode, 0o755);
    assert.equal(got.get('link')?.type, 'symlink');
    assert.equal(got.get('link')?.linkname, 'nested/deep.txt');
    for (const [name, entry] of got) {
      assert.deepEqual([entry.uid, entry.gid, entry.uname, entry.gname], [0, 0, '', ''], `${name} records no host uid`);
    }
    // Extracting the download again at another path is accepted (what `berth pull` + `berth push` do).
    assert.equal((await upload(await download('round'), 'copy')).status, 200);
    assert.deepEqual((await entriesOf(await download('copy'))).get('data.bin')?.content, binary);
  });

  test('an upload the client abandons halfway writes nothing and leaves nothing in .berth/tmp', async () => {
    const before = await treeListing();
    const archive = gzipSync(await tarOf([benign, { name: 'noise.bin', content: randomBytes(2 * 1024 * 1024) }]));
    await new Promise<void>((resolve) => {
      const request = httpRequest(`${t.url}/workspaces/${workspace}/archive`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', 'content-length': archive.length },
      });
      request.on('error', () => resolve());
      request.write(archive.subarray(0, archive.length / 2), () => setTimeout(() => {
        request.destroy();
        resolve();
      }, 300));
    });
    const deadline = Date.now() + 10_000;
    while ((await leftInTmp()).length > 0) {
      assert.ok(Date.now() < deadline, `the partial upload is removed: ${await leftInTmp()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(await treeListing(), before);
  });

  test('a download the client abandons halfway leaves Berth serving (and the disk unmountable at stop)', async () => {
    const created = await t.request('POST', '/workspaces', {});
    const id = created.body.id as string;
    // Random bytes do not compress: the download is still being written when the client goes away.
    assert.equal((await upload(await tarOf([{ name: 'noise.bin', content: randomBytes(8 * 1024 * 1024) }]), undefined, id)).status, 200);
    const controller = new AbortController();
    const response = await fetch(`${t.url}/workspaces/${id}/archive`, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.read().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const again = await t.request('GET', `/workspaces/${id}`);
    assert.equal(again.status, 200, 'Berth still answers');
    assert.equal((await t.request('DELETE', `/workspaces/${id}`)).status, 200, 'and the workspace can be deleted (its disk unmounted)');
  });

  test('a diff since the upload shows a changed text file and lists a binary one; since=last_run with no run is a 400 naming since', async () => {
    const created = await t.request('POST', '/workspaces', {});
    const id = created.body.id as string;
    assert.equal((await upload(gzipSync(await tarOf([{ name: 'src/app.py', content: 'def f():\n    return 1\n' }, { name: 'img.bin', content: Buffer.from([1, 0, 2]) }])), undefined, id)).status, 200);
    const put = (path: string, body: Buffer | string) =>
      fetch(`${t.url}/workspaces/${id}/files/${path}`, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: typeof body === 'string' ? body : new Uint8Array(body) });
    assert.equal((await put('src/app.py', 'def f():\n    return 2\n')).status, 201);
    assert.equal((await put('img.bin', Buffer.from([1, 0, 3]))).status, 201);
    const diff = await t.request('GET', `/workspaces/${id}/diff?since=upload`);
    assert.equal(diff.status, 200, JSON.stringify(diff.body));
    assert.deepEqual(diff.body.changed, ['img.bin', 'src/app.py']);
    assert.deepEqual(diff.body.added, []);
    assert.deepEqual(diff.body.binary, ['img.bin']);
    assert.match(diff.body.diff, /--- a\/src\/app.py\n\+\+\+ b\/src\/app.py\n@@ -1,2 \+1,2 @@\n def f\(\):\n-    return 1\n\+    return 2\n/);
    assert.doesNotMatch(diff.body.diff, /img.bin/);
    const text = await fetch(`${t.url}/workspaces/${id}/diff?since=upload`, { headers: { accept: 'text/x-diff' } });
    assert.equal(text.status, 200);
    assert.match(text.headers.get('content-type') ?? '', /^text\/x-diff/);
    assert.equal(await text.text(), diff.body.diff);
    const noRun = await t.request('GET', `/workspaces/${id}/diff?since=last_run`);
    assert.equal(noRun.status, 400, JSON.stringify(noRun.body));
    assert.match(noRun.body.error, /^since: /);
    const other = await t.request('GET', `/workspaces/${id}/diff?since=yesterday`);
    assert.equal(other.status, 400, JSON.stringify(other.body));
  });

  test('an upload is refused (409) while a run holds the workspace, and accepted after it', async () => {
    const created = await t.request('POST', '/workspaces', {});
    const id = created.body.id as string;
    const run = t.request('POST', '/run', { prompt: 'run: sleep 6 && echo done', workspace: id });
    const deadline = Date.now() + 60_000;
    while (!(await t.request('GET', `/workspaces/${id}`)).body.in_use) {
      assert.ok(Date.now() < deadline, 'the run took the workspace');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const busy = await upload(await tarOf([benign]), undefined, id);
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    const finished = await run;
    assert.equal(finished.status, 200, JSON.stringify(finished.body));
    // The run gives the workspace back as it ends (its answer may come first).
    while ((await t.request('GET', `/workspaces/${id}`)).body.in_use) {
      assert.ok(Date.now() < deadline, 'the run gave the workspace back');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal((await upload(await tarOf([benign]), undefined, id)).status, 200);
    const sinceRun = await t.request('GET', `/workspaces/${id}/diff?since=last_run`);
    assert.equal(sinceRun.status, 200, JSON.stringify(sinceRun.body));
    assert.deepEqual(sinceRun.body.added, ['benign.txt']);
  });
});

describe('another caller\'s workspace archives and diffs', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'] as const, { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_WORKSPACE_MAX_BYTES: '64m' }));
  });
  after(async () => {
    await t?.stop();
  });

  test('are 404 to bob: he can neither extract into alice\'s workspace nor download or diff it', async () => {
    const created = await t.request('POST', '/workspaces', {}, as('alice'));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const archive = gzipSync(await tarOf([{ name: 'alice.txt', content: 'alice\n' }]));
    const post = (who: 'alice' | 'bob') =>
      fetch(`${t.url}/workspaces/${id}/archive`, { method: 'POST', headers: { ...as(who), 'content-type': 'application/octet-stream' }, body: new Uint8Array(archive) });
    assert.equal((await post('alice')).status, 200);
    const bobPost = await post('bob');
    assert.equal(bobPost.status, 404);
    assert.match(((await bobPost.json()) as { error: string }).error, new RegExp(`workspace ${id} not found`));
    assert.equal((await fetch(`${t.url}/workspaces/${id}/archive`, { headers: as('bob') })).status, 404);
    assert.equal((await t.request('GET', `/workspaces/${id}/diff?since=upload`, undefined, as('bob'))).status, 404);
    const mine = await t.request('GET', `/workspaces/${id}/diff?since=upload`, undefined, as('alice'));
    assert.equal(mine.status, 200, JSON.stringify(mine.body));
    assert.deepEqual([mine.body.added, mine.body.changed, mine.body.removed], [[], [], []], 'bob\'s attempt changed nothing');
    const download = await fetch(`${t.url}/workspaces/${id}/archive`, { headers: as('alice') });
    assert.deepEqual([...(await entriesOf(Buffer.from(await download.arrayBuffer()))).keys()], ['alice.txt']);
  });
});
