// Workspaces and their files API on a real Berth (real loop disks): the resource's life, uploads and
// downloads (Range, listings, owners and modes on the disk), the size and file-count limits (413 with
// nothing half-written), the per-caller cap, and a restart that finds every workspace again while leaving
// nothing mounted in between.
import assert from 'node:assert/strict';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { asRun, chunkedUpload, leftAfterStop, rawRequest } from '../support/workspaces.js';

const LIMITS = {
  SERVICE_POOL_SIZE: '0',
  SERVICE_AGENT_POOL_SIZE: '0',
  SERVICE_WORKSPACE_MAX_BYTES: '64m',
  SERVICE_WORKSPACE_MAX_FILES: '100',
  SERVICE_WORKSPACE_MAX_PER_CALLER: '5',
};

let t: TestBerth;
before(async () => {
  t = await startTestBerth(LIMITS);
});
after(async () => {
  await t?.stop();
});

async function create(): Promise<string> {
  const created = await t.request('POST', '/workspaces', {});
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.id;
}

const put = (id: string, path: string, body: string | Buffer) => rawRequest(t.url, 'PUT', `/workspaces/${id}/files/${path}`, { body, headers: { 'content-type': 'application/octet-stream' } });
const get = (id: string, path: string, headers: Record<string, string> = {}) => rawRequest(t.url, 'GET', `/workspaces/${id}/files/${path}`, { headers });

/** The workspace's staging directory on its disk (mounted while in use and for a minute after). */
const stagingDir = (id: string) => join(t.config.agent.sessionsDir, '.workspaces', id, '.berth', 'tmp');

describe('the workspace resource', () => {
  it('is created empty, listed, described and deleted', async () => {
    const id = await create();
    const described = await t.request('GET', `/workspaces/${id}`);
    assert.equal(described.status, 200);
    assert.deepEqual(
      { ...described.body, created_at: undefined, last_used_at: undefined },
      { id, created_at: undefined, last_used_at: undefined, size_bytes: 0, max_bytes: 64 * 1024 * 1024, file_count: 0, max_files: 100, sessions: [], owner_session: null, in_use: false, source: 'empty' },
    );
    assert.ok((await t.request('GET', '/workspaces')).body.workspaces.some((ws: { id: string }) => ws.id === id));
    assert.deepEqual((await t.request('DELETE', `/workspaces/${id}`)).body, { success: true, workspace_id: id });
    assert.equal((await t.request('GET', `/workspaces/${id}`)).status, 404);
    assert.equal((await t.request('DELETE', `/workspaces/${id}`)).status, 404);
    assert.equal((await t.request('GET', '/workspaces/not-a-uuid')).status, 404);
    assert.deepEqual(await readdir(join(t.config.agent.sessionsDir, '.workspaces')).then((names) => names.filter((name) => name.startsWith(id))), [], 'disk, image and view are gone');
  });

  it('refuses unknown body fields and a git URL it will not clone with 400 naming the field, creating nothing', async () => {
    const before = (await t.request('GET', '/workspaces')).body.workspaces.length;
    const unknown = await t.request('POST', '/workspaces', { size: 1 });
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.error, /size/);
    const git = await t.request('POST', '/workspaces', { git: { url: 'ext::sh -c touch% /tmp/berth-pwned' } });
    assert.equal(git.status, 400, JSON.stringify(git.body));
    assert.match(git.body.error, /git/);
    assert.equal((await t.request('GET', '/workspaces')).body.workspaces.length, before);
  });
});

describe('files', () => {
  let id: string;
  before(async () => {
    id = await create();
  });

  it('an upload creates its parents and comes back byte for byte, owned by the container user with sane modes', async () => {
    const content = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    const uploaded = await put(id, 'src/deep/data.bin', content);
    assert.equal(uploaded.status, 201, uploaded.text);
    assert.deepEqual(JSON.parse(uploaded.text), { path: 'src/deep/data.bin', size: content.length });
    const downloaded = await get(id, 'src/deep/data.bin');
    assert.equal(downloaded.status, 200);
    assert.equal(downloaded.headers['content-type'], 'application/octet-stream');
    assert.equal(downloaded.headers['accept-ranges'], 'bytes');
    assert.ok(downloaded.body.equals(content));
    const hostOwner = t.config.agent.usernsBase + t.config.workspaces.fileOwnerUid;
    await asRun(t, '', id, async (tree) => {
      for (const [path, mode] of [['src', 0o40755], ['src/deep', 0o40755], ['src/deep/data.bin', 0o100644]] as const) {
        const stats = await lstat(join(tree, path));
        assert.equal(stats.uid, hostOwner, path);
        assert.equal(stats.gid, hostOwner, path);
        assert.equal(stats.mode, mode, `${path}: ${stats.mode.toString(8)}`);
      }
    });
    const described = (await t.request('GET', `/workspaces/${id}`)).body;
    assert.equal(described.file_count, 3);
    assert.equal(described.size_bytes, content.length);
  });

  it('Range answers 206 with the bytes asked for, 416 past the end', async () => {
    await put(id, 'range.txt', '0123456789');
    const part = await get(id, 'range.txt', { range: 'bytes=2-5' });
    assert.equal(part.status, 206);
    assert.equal(part.text, '2345');
    assert.equal(part.headers['content-range'], 'bytes 2-5/10');
    const suffix = await get(id, 'range.txt', { range: 'bytes=-3' });
    assert.equal(suffix.text, '789');
    const beyond = await get(id, 'range.txt', { range: 'bytes=10-' });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], 'bytes */10');
    assert.equal(JSON.parse(beyond.text).status, 'error');
  });

  it('a directory is listed as JSON; the root by files and files/', async () => {
    await put(id, 'list/b.txt', 'bb');
    await put(id, 'list/a.txt', 'a');
    const listing = JSON.parse((await get(id, 'list')).text);
    assert.equal(listing.path, 'list');
    assert.deepEqual(listing.entries.map((e: { name: string; type: string; size: number; mode: number }) => [e.name, e.type, e.size, e.mode]), [
      ['a.txt', 'file', 1, 0o644],
      ['b.txt', 'file', 2, 0o644],
    ]);
    for (const path of [`/workspaces/${id}/files`, `/workspaces/${id}/files/`]) {
      const root = JSON.parse((await rawRequest(t.url, 'GET', path)).text);
      assert.equal(root.path, '');
      assert.ok(root.entries.some((e: { name: string }) => e.name === 'list'), path);
    }
  });

  it('a file is replaced whole; a directory is not overwritten by a file', async () => {
    await put(id, 'replace.txt', 'first version, longer');
    await put(id, 'replace.txt', 'second');
    assert.equal((await get(id, 'replace.txt')).text, 'second');
    const onDir = await put(id, 'list', 'x');
    assert.equal(onDir.status, 400);
    assert.match(JSON.parse(onDir.text).error, /directory/);
    const underFile = await put(id, 'replace.txt/child', 'x');
    assert.equal(underFile.status, 400);
  });

  it('DELETE removes a file, a directory with its contents; absent paths are 404', async () => {
    const usage = async () => {
      const { size_bytes, file_count } = (await t.request('GET', `/workspaces/${id}`)).body;
      return { size_bytes, file_count };
    };
    const before = await usage();
    await put(id, 'gone/inner/x.txt', 'x');
    await put(id, 'gone/y.txt', 'yy');
    assert.deepEqual(await usage(), { size_bytes: before.size_bytes + 3, file_count: before.file_count + 4 });
    assert.equal((await rawRequest(t.url, 'DELETE', `/workspaces/${id}/files/gone`)).status, 200);
    assert.deepEqual(await usage(), before);
    assert.equal((await get(id, 'gone/inner/x.txt')).status, 404);
    assert.equal((await rawRequest(t.url, 'DELETE', `/workspaces/${id}/files/gone`)).status, 404);
    assert.equal((await get(id, 'never-there')).status, 404);
  });

  it('the usage kept from each upload and delete is what a walk of the tree finds', async () => {
    const kept = (await t.request('GET', `/workspaces/${id}`)).body;
    // A run's end measures the tree by walking it.
    await asRun(t, '', id, async () => undefined);
    const walked = (await t.request('GET', `/workspaces/${id}`)).body;
    assert.deepEqual([walked.size_bytes, walked.file_count], [kept.size_bytes, kept.file_count]);
  });
});

describe('limits', () => {
  it('an upload larger than the free space is refused from its Content-Length before it is read', async () => {
    const id = await create();
    const started = Date.now();
    const answer = await rawRequest(t.url, 'PUT', `/workspaces/${id}/files/big.bin`, { headers: { 'content-type': 'application/octet-stream', 'content-length': String(80 * 1024 * 1024) }, body: Buffer.alloc(0) }).catch((error: Error) => error);
    if (answer instanceof Error) assert.fail(answer.message);
    assert.equal(answer.status, 413, answer.text);
    assert.match(JSON.parse(answer.text).error, /is full/);
    assert.equal(answer.headers.connection, 'close', 'the rest of the body is not read');
    assert.ok(Date.now() - started < 5_000);
    assert.equal((await get(id, 'big.bin')).status, 404);
  });

  it('a chunked upload that fills the disk answers 413 and leaves the old file and no staging copy', async () => {
    const id = await create();
    await put(id, 'keep/data.txt', 'old content');
    const answer = await chunkedUpload(t.url, `/workspaces/${id}/files/keep/data.txt`, {}, 80 * 1024 * 1024);
    assert.equal(answer.status, 413, answer.text);
    assert.match(JSON.parse(answer.text).error, /nothing of this upload was written/);
    assert.equal((await get(id, 'keep/data.txt')).text, 'old content');
    const fresh = await chunkedUpload(t.url, `/workspaces/${id}/files/new/dirs/big.bin`, {}, 80 * 1024 * 1024);
    assert.equal(fresh.status, 413, fresh.text);
    assert.equal((await get(id, 'new')).status, 404, 'parents made for a refused upload are gone too');
    assert.deepEqual(await readdir(stagingDir(id)), []);
    // The space is back: a file of most of the disk fits now.
    const fits = await chunkedUpload(t.url, `/workspaces/${id}/files/fits.bin`, {}, 40 * 1024 * 1024);
    assert.equal(fits.status, 201, fits.text);
    assert.equal((await t.request('GET', `/workspaces/${id}`)).body.size_bytes, 40 * 1024 * 1024 + 'old content'.length);
    await t.request('DELETE', `/workspaces/${id}`);
  });

  it('SERVICE_WORKSPACE_MAX_FILES counts every entry; an upload past it is 413, a replacement is not', async () => {
    const id = await create();
    const deep = Array.from({ length: 98 }, (_, i) => `d${i}`).join('/');
    assert.equal((await put(id, `${deep}/f`, 'x')).status, 201);
    assert.equal((await t.request('GET', `/workspaces/${id}`)).body.file_count, 99);
    assert.equal((await put(id, 'one-more', 'x')).status, 201);
    const refused = await put(id, 'too-many', 'x');
    assert.equal(refused.status, 413, refused.text);
    assert.match(JSON.parse(refused.text).error, /100 files/);
    assert.equal((await get(id, 'too-many')).status, 404);
    assert.equal((await put(id, 'one-more', 'replaced')).status, 201);
    await t.request('DELETE', `/workspaces/${id}`);
  });

  it('a caller may have SERVICE_WORKSPACE_MAX_PER_CALLER workspaces (429 past it)', async () => {
    const listed = (await t.request('GET', '/workspaces')).body.workspaces as { id: string }[];
    for (const ws of listed) await t.request('DELETE', `/workspaces/${ws.id}`);
    for (let i = 0; i < 5; i += 1) await create();
    const refused = await t.request('POST', '/workspaces', {});
    assert.equal(refused.status, 429);
    assert.match(refused.body.error, /SERVICE_WORKSPACE_MAX_PER_CALLER/);
  });
});

describe('a restart', () => {
  it('leaves nothing mounted at the stop, and the next Berth finds the workspaces and their files again', async () => {
    const listed = (await t.request('GET', '/workspaces')).body.workspaces as { id: string }[];
    const id = listed[0]!.id;
    assert.equal((await put(id, 'survives/restart.txt', 'still here')).status, 201);
    await t.berth.stop();
    assert.deepEqual(await leftAfterStop(t.dir), { mounts: [], loops: [] });
    const again = await startTestBerth({ ...LIMITS, SERVICE_DATA_DIR: t.config.dataDir, SERVICE_AGENT_SESSIONS_DIR: t.config.agent.sessionsDir });
    try {
      assert.equal((await again.request('GET', `/workspaces/${id}`)).status, 200);
      assert.equal((await rawRequest(again.url, 'GET', `/workspaces/${id}/files/survives/restart.txt`)).text, 'still here');
      assert.equal((await again.request('GET', '/workspaces')).body.workspaces.length, 5);
    } finally {
      await again.berth.stop();
      assert.deepEqual(await leftAfterStop(t.dir), { mounts: [], loops: [] });
      await again.stop();
    }
  });
});

describe('SERVICE_WORKSPACE_TTL', () => {
  it('a workspace nobody uses is swept with its disk; one in use is kept', async () => {
    const short = await startTestBerth({ ...LIMITS, SERVICE_WORKSPACE_TTL: '2s' });
    try {
      const unused = (await short.request('POST', '/workspaces', {})).body.id as string;
      const used = (await short.request('POST', '/workspaces', {})).body.id as string;
      const lease = await short.berth.workspaces.acquire('', used, { kind: 'agent', id: 'agent-ttl-test' });
      // Gone for callers from the moment the sweep begins removing it; its disk a moment later.
      const diskOf = async (id: string) => (await readdir(join(short.config.agent.sessionsDir, '.workspaces'))).filter((name) => name.startsWith(id));
      const deadline = Date.now() + 15_000;
      while ((await short.request('GET', `/workspaces/${unused}`)).status === 200 || (await diskOf(unused)).length > 0) {
        assert.ok(Date.now() < deadline, `the unused workspace was not swept within 15 s: ${(await diskOf(unused)).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.equal((await short.request('GET', `/workspaces/${used}`)).body.in_use, true, 'the held one stays');
      await lease.release();
    } finally {
      await short.stop();
    }
  });
});
