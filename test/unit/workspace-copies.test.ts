// Workspaces saved to and restored from a shared directory (SERVICE_SHARED_DIR, issue 26) by two nodes'
// WorkspaceServices on one index: GNU tar on real files, disks faked as plain directories (the real disks,
// their nosymfollow views and real Berths are in test/integration/cluster-sessions.test.ts). What a run
// left on node A is there on node B; A's older disk is replaced before A uses it again; links stay links;
// a never-saved workspace with files elsewhere is a 503; a delete removes the copy; the copy is private.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readlink, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, beforeEach, it } from 'node:test';
import { SharedWorkspaceCopies } from '../../src/core/workspaces/shared-copies.js';
import { WorkspaceService, type MountedWorkspaceDisk, type WorkspaceDiskPort } from '../../src/core/workspaces/workspace-service.js';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';
import { refused } from './support/refused.js';

const root = await mkdtemp(join(tmpdir(), 'berth-workspace-copies-'));
after(() => rm(root, { recursive: true, force: true }));

/** Disks as directories (the "view" is the directory itself). */
class FakeDisks implements WorkspaceDiskPort {
  constructor(readonly dir: string) {}
  private handle(id: string): MountedWorkspaceDisk {
    return { mountPoint: join(this.dir, id), view: join(this.dir, id), release: () => undefined };
  }
  async create(id: string) {
    if (await this.exists(id)) throw new Error(`disk ${id} exists`);
    await mkdir(join(this.dir, id, 'tree'), { recursive: true });
    await mkdir(join(this.dir, id, '.berth', 'tmp'), { recursive: true, mode: 0o700 });
    return this.handle(id);
  }
  async open(id: string) {
    if (!(await this.exists(id))) throw new Error('no disk');
    return this.handle(id);
  }
  async exists(id: string) {
    return stat(join(this.dir, id)).then(() => true, () => false);
  }
  async remove(id: string) {
    await rm(join(this.dir, id), { recursive: true, force: true });
  }
  async list(): Promise<string[]> {
    return readdir(this.dir);
  }
}

let shared: string;
let store: SqliteWorkspaceStore;
let logs: string[];

async function node(name: string): Promise<{ service: WorkspaceService; disks: FakeDisks }> {
  const disks = new FakeDisks(join(root, `${name}-${Math.random().toString(36).slice(2)}`));
  await mkdir(disks.dir);
  const service = new WorkspaceService({
    store,
    disks,
    sharedIndex: true,
    copies: { store: await SharedWorkspaceCopies.open(shared, 10 << 20), node: name },
    settings: { maxBytes: 1 << 20, maxFiles: 100, ttlMs: 86_400_000, maxPerCaller: 5, diffMaxFileBytes: 1024, fileOwner: { uid: 0, gid: 0 } },
    takeCheckpoint: async () => undefined,
    log: (_details, message) => logs.push(message),
  });
  return { service, disks };
}

beforeEach(async () => {
  shared = await mkdtemp(join(root, 'shared-'));
  store = new SqliteWorkspaceStore(':memory:');
  logs = [];
});

/** A run on the node: holds the workspace, writes into its tree, gives it back. */
async function run(service: WorkspaceService, id: string, write: (tree: string) => Promise<void>): Promise<void> {
  const lease = await service.acquire('caller-1', id, { kind: 'run', id: 'r' });
  await write(lease.treeHostPath);
  await lease.release();
}

it("what a run left on node A is on node B; A's older disk is replaced before A uses it again", async () => {
  const a = await node('a');
  const b = await node('b');
  const { id } = await a.service.create('caller-1');
  await run(a.service, id, async (tree) => {
    await writeFile(join(tree, 'notes.txt'), 'from a');
    await mkdir(join(tree, 'src'));
    await writeFile(join(tree, 'src', 'main.py'), 'print(1)', { mode: 0o755 });
    await symlink('/etc/shadow', join(tree, 'shadow'));
  });
  assert.deepEqual(await store.copyOf(id), { copy: 1, node: 'a' });
  const copy = join(shared, 'workspaces', `${id}.tar`);
  assert.equal((await stat(copy)).mode & 0o777, 0o600);
  assert.equal((await stat(join(shared, 'workspaces'))).mode & 0o777, 0o700);

  await run(b.service, id, async (tree) => {
    assert.equal(await readFile(join(tree, 'notes.txt'), 'utf8'), 'from a');
    assert.equal((await stat(join(tree, 'src', 'main.py'))).mode & 0o777, 0o755);
    const link = await lstat(join(tree, 'shadow'));
    assert.ok(link.isSymbolicLink(), 'a link is restored as a link');
    assert.equal(await readlink(join(tree, 'shadow')), '/etc/shadow');
    await writeFile(join(tree, 'notes.txt'), 'from b');
  });
  assert.deepEqual(await store.copyOf(id), { copy: 2, node: 'b' });
  const seen = await a.service.withFiles('caller-1', id, 'read', (ws) => readFile(join(ws.tree, 'notes.txt'), 'utf8'));
  assert.equal(seen, 'from b', 'A restored the copy B saved instead of using its own older disk');
  assert.ok(logs.includes('workspace restored from SERVICE_SHARED_DIR'));
});

it('an API write on one node is saved too', async () => {
  const a = await node('a');
  const b = await node('b');
  const { id } = await a.service.create('caller-1');
  await a.service.withFiles('caller-1', id, 'write', (ws) => writeFile(join(ws.tree, 'up.txt'), 'uploaded'));
  assert.equal(await b.service.withFiles('caller-1', id, 'read', (ws) => readFile(join(ws.tree, 'up.txt'), 'utf8')), 'uploaded');
});

it('an empty workspace never saved is made empty on another node; one with files elsewhere is a 503', async () => {
  const a = await node('a');
  const b = await node('b');
  const empty = await a.service.create('caller-1');
  assert.deepEqual(await b.service.withFiles('caller-1', empty.id, 'read', (ws) => readdir(ws.tree)), []);
  const full = await a.service.create('caller-1');
  await store.update(full.id, { fileCount: 3 });
  await assert.rejects(b.service.withFiles('caller-1', full.id, 'read', async () => undefined), refused(/never saved to SERVICE_SHARED_DIR/, 503));
});

it("a delete removes the saved copy; another caller's workspace is a 404 on every node", async () => {
  const a = await node('a');
  const b = await node('b');
  const { id } = await a.service.create('caller-1');
  await run(a.service, id, (tree) => writeFile(join(tree, 'x'), 'x'));
  await assert.rejects(b.service.acquire('caller-2', id, { kind: 'run', id: 'r2' }), refused(/not found/, 404));
  await b.service.delete('caller-1', id);
  assert.deepEqual((await readdir(join(shared, 'workspaces'))).filter((name) => !name.startsWith('.')), []);
});

it('SERVICE_SHARED_DIR is checked at start, naming the variable', async () => {
  await assert.rejects(SharedWorkspaceCopies.open(join(root, 'nowhere'), 1), /SERVICE_SHARED_DIR: .*nowhere.* does not exist/);
  const file = join(root, 'a-file');
  await writeFile(file, '');
  await assert.rejects(SharedWorkspaceCopies.open(file, 1), /SERVICE_SHARED_DIR: .* is not a directory/);
});

it('a copy larger than a workspace can make is not restored', async () => {
  const a = await node('a');
  const { id } = await a.service.create('caller-1');
  await run(a.service, id, (tree) => writeFile(join(tree, 'big'), Buffer.alloc(64 * 1024, 1)));
  const small = await SharedWorkspaceCopies.open(shared, 10 * 1024);
  const target = join(root, 'restore-target');
  await mkdir(join(target, 'tree'), { recursive: true });
  await assert.rejects(small.restore(id, target), /more than a workspace can hold/);
  assert.deepEqual(await readdir(join(target, 'tree')), []);
});
