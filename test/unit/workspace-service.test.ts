// WorkspaceService's decisions, on disks faked as plain directories (the real disks and their nosymfollow
// views are exercised against a real Berth in test/integration/workspaces-files.test.ts).
import assert from 'node:assert/strict';
import { chmod, lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, beforeEach, describe, it } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { SqliteWorkspaceStore } from '../../src/store/workspaces/sqlite-workspace-store.js';
import { WorkspaceService, type MountedWorkspaceDisk, type WorkspaceDiskPort } from '../../src/core/workspaces/workspace-service.js';
import type { OpenWorkspace } from '../../src/core/workspaces/open-workspace.js';
import { refused } from './support/refused.js';

const root = await mkdtemp(join(tmpdir(), 'berth-workspace-service-'));
after(() => rm(root, { recursive: true, force: true }));

/** Disks as directories: the "view" is the directory itself; counts mounts like the real ones. */
class FakeDisks implements WorkspaceDiskPort {
  readonly open_ = new Map<string, number>();
  constructor(readonly dir: string) {}
  private handle(id: string): MountedWorkspaceDisk {
    this.open_.set(id, (this.open_.get(id) ?? 0) + 1);
    let released = false;
    return {
      mountPoint: join(this.dir, id),
      view: join(this.dir, id),
      release: () => {
        if (!released) this.open_.set(id, this.open_.get(id)! - 1);
        released = true;
      },
    };
  }
  async create(id: string) {
    await mkdir(join(this.dir, id, 'tree'), { recursive: true });
    await mkdir(join(this.dir, id, '.berth', 'tmp'), { recursive: true });
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
    return [];
  }
}

const DAY = 86_400_000;
let now = Date.parse('2030-01-01T00:00:00Z');
let checkpoints: string[];
let disks: FakeDisks;
let service: WorkspaceService;

function build(overrides: Partial<ConstructorParameters<typeof WorkspaceService>[0]> = {}): WorkspaceService {
  return new WorkspaceService({
    store: new SqliteWorkspaceStore(':memory:'),
    disks,
    settings: { maxBytes: 1 << 20, maxFiles: 100, ttlMs: 7 * DAY, maxPerCaller: 2, diffMaxFileBytes: 1024, fileOwner: { uid: process.getuid!(), gid: process.getgid!() } },
    now: () => now,
    takeCheckpoint: async (ws: OpenWorkspace, name) => {
      checkpoints.push(`${ws.id}:${name}`);
    },
    ...overrides,
  });
}

async function status(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof BerthError) return error.status;
    throw error;
  }
}

beforeEach(async () => {
  now = Date.parse('2030-01-01T00:00:00Z');
  checkpoints = [];
  disks = new FakeDisks(await mkdtemp(join(root, 'disks-')));
  service = build();
});

describe('owner isolation', () => {
  it('another caller\'s workspace is not found for every operation, like a missing one', async () => {
    const ws = await service.create('alice');
    const calls: Promise<unknown>[] = [
      service.get('mallory', ws.id),
      service.delete('mallory', ws.id),
      service.withFiles('mallory', ws.id, 'read', async () => undefined),
      service.withFiles('mallory', ws.id, 'write', async () => undefined),
      service.acquire('mallory', ws.id, { kind: 'run', id: 'run-1' }),
      service.forkForSession('mallory', ws.id, 'session-x'),
    ];
    for (const call of calls) assert.equal(await status(call), 404);
    assert.deepEqual(await service.list('mallory'), []);
    assert.equal((await service.get('alice', ws.id)).id, ws.id, 'still there for its owner');
    assert.equal(await status(service.get('alice', 'not-a-uuid')), 404);
  });
});

describe('limits', () => {
  it('a caller may create SERVICE_WORKSPACE_MAX_PER_CALLER workspaces; session-owned ones are not counted', async () => {
    await service.create('alice');
    await service.create('alice', { ownedBySession: 'session-1' });
    await service.create('alice');
    assert.equal(await status(service.create('alice')), 429);
    assert.equal(await status(Promise.all([service.create('bob'), service.create('bob'), service.create('bob')])), 429, 'concurrent creations count too');
    await service.create('alice', { ownedBySession: 'session-2' });
  });
});

describe('leases', () => {
  it('one run or agent at a time: a second acquire, an API write and a delete answer 409; reads go on', async () => {
    const ws = await service.create('alice');
    const lease = await service.acquire('alice', ws.id, { kind: 'run', id: 'run-1' });
    assert.deepEqual(checkpoints, [`${ws.id}:last_run`], 'the last_run checkpoint is taken before the run gets the tree');
    assert.equal(lease.treeHostPath, join(disks.dir, ws.id, 'tree'));
    assert.equal(await status(service.acquire('alice', ws.id, { kind: 'agent', id: 'agent-1' })), 409);
    assert.equal(await status(service.withFiles('alice', ws.id, 'write', async () => undefined)), 409);
    assert.equal(await status(service.delete('alice', ws.id)), 409);
    assert.equal(await status(service.withFiles('alice', ws.id, 'read', async () => undefined)), 200);
    assert.equal((await service.get('alice', ws.id)).in_use, true);
    await writeFile(join(lease.treeHostPath, 'written-by-run.txt'), 'hello');
    await lease.release();
    await lease.release();
    const after = await service.get('alice', ws.id);
    assert.equal(after.in_use, false);
    assert.equal(after.file_count, 1, 'the tree is measured when the run gives it back');
    assert.equal(after.size_bytes, 5);
    assert.equal(disks.open_.get(ws.id), 0, 'the disk reference is given back');
    await service.delete('alice', ws.id);
    assert.equal(await disks.exists(ws.id), false);
  });

  it('a run is not let in while an upload is being written', async () => {
    const ws = await service.create('alice');
    let finish: (() => void) | undefined;
    const writing = service.withFiles('alice', ws.id, 'write', () => new Promise<void>((resolve) => (finish = resolve)));
    while (finish === undefined) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(await status(service.acquire('alice', ws.id, { kind: 'run', id: 'run-1' })), 409);
    finish();
    await writing;
    const lease = await service.acquire('alice', ws.id, { kind: 'run', id: 'run-1' });
    await lease.release();
  });

  it('a failed checkpoint gives the workspace back', async () => {
    const failing = build({ takeCheckpoint: async () => { throw new Error('disk error'); } });
    const ws = await failing.create('alice');
    await assert.rejects(failing.acquire('alice', ws.id, { kind: 'run', id: 'run-1' }), /disk error/);
    assert.equal((await failing.get('alice', ws.id)).in_use, false);
  });
});

describe('writes', () => {
  it('writes are measured and serialized: each sees the usage the one before left', async () => {
    const ws = await service.create('alice');
    const seen: number[] = [];
    await Promise.all(
      [1, 2, 3].map((n) =>
        service.withFiles('alice', ws.id, 'write', async (open) => {
          seen.push(open.fileCount);
          await writeFile(join(open.tree, `f${n}`), 'x'.repeat(n));
        }),
      ),
    );
    assert.deepEqual(seen, [0, 1, 2]);
    const view = await service.get('alice', ws.id);
    assert.equal(view.file_count, 3);
    assert.equal(view.size_bytes, 6);
  });
});

describe('sessions', () => {
  it('a session\'s own workspace is removed with it; a caller\'s is only unlinked', async () => {
    const own = await service.create('alice', { ownedBySession: 'session-1' });
    await service.linkSession('session-1', own.id, true);
    const shared = await service.create('alice');
    await service.linkSession('session-2', shared.id, false);
    assert.deepEqual(await service.sessionWorkspace('session-1'), { id: own.id, owned: true });
    assert.deepEqual((await service.get('alice', shared.id)).sessions, ['session-2']);
    await service.removeForSession('session-1');
    await service.removeForSession('session-2');
    await service.removeForSession('session-3');
    assert.equal(await status(service.get('alice', own.id)), 404);
    assert.equal(await disks.exists(own.id), false);
    assert.deepEqual((await service.get('alice', shared.id)).sessions, []);
    assert.equal(await service.sessionWorkspace('session-2'), undefined);
  });

  it('a fork gets a copy of the tree, owned by the new session', async () => {
    const from = await service.create('alice');
    await service.withFiles('alice', from.id, 'write', async (ws) => {
      await mkdir(join(ws.tree, 'src'));
      await writeFile(join(ws.tree, 'src', 'a.txt'), 'original');
      await writeFile(join(ws.tree, 'setuid'), 'x', { mode: 0o755 });
      await chmod(join(ws.tree, 'setuid'), 0o6755);
      await symlink('src/a.txt', join(ws.tree, 'link'));
    });
    const copyId = await service.forkForSession('alice', from.id, 'session-fork');
    assert.notEqual(copyId, from.id);
    const copy = await service.get('alice', copyId);
    assert.equal(copy.source, 'fork');
    assert.equal(copy.owner_session, 'session-fork');
    assert.equal(copy.file_count, 4);
    const copied = await service.withFiles('alice', copyId, 'read', async (ws) => ({ setuid: (await lstat(join(ws.tree, 'setuid'))).mode & 0o7777, link: await readlink(join(ws.tree, 'link')) }));
    assert.deepEqual(copied, { setuid: 0o755, link: 'src/a.txt' }, 'links stay links; setuid/setgid bits are not copied');
    assert.deepEqual(await service.sessionWorkspace('session-fork'), { id: copyId, owned: true });
    await service.withFiles('alice', copyId, 'write', async (ws) => writeFile(join(ws.tree, 'src', 'a.txt'), 'changed'));
    const original = await service.withFiles('alice', from.id, 'read', async (ws) => readFile(join(ws.tree, 'src', 'a.txt'), 'utf8'));
    assert.equal(original, 'original');
  });
});

describe('TTL', () => {
  it('the sweep removes workspaces unused for the TTL, not used or leased ones', async () => {
    const old = await service.create('alice');
    const leased = await service.create('alice', { ownedBySession: 's' });
    const lease = await service.acquire('alice', leased.id, { kind: 'agent', id: 'agent-1' });
    now += 6 * DAY;
    const recent = await service.create('bob');
    now += 2 * DAY;
    await service.sweep(now);
    assert.equal(await status(service.get('alice', old.id)), 404);
    assert.equal(await disks.exists(old.id), false);
    assert.equal((await service.get('alice', leased.id)).in_use, true);
    assert.equal((await service.get('bob', recent.id)).id, recent.id);
    await lease.release();
  });
});

describe('an index shared by several nodes (SERVICE_DATABASE_URL)', () => {
  /** A node's disks: directories of its own, listed as they are. */
  class NodeDisks extends FakeDisks {
    override async list() {
      const { readdir } = await import('node:fs/promises');
      return readdir(this.dir);
    }
  }

  it('a node neither drops at start nor sweeps a workspace whose disk is on another node; the owner node sweeps it', async () => {
    const index = new SqliteWorkspaceStore(':memory:');
    const [dirA, dirB] = [join(root, 'node-a'), join(root, 'node-b')];
    await mkdir(dirA, { recursive: true });
    await mkdir(dirB, { recursive: true });
    const nodeA = build({ store: index, disks: new NodeDisks(dirA), sharedIndex: true });
    const onA = await nodeA.create('alice');
    const nodeB = build({ store: index, disks: new NodeDisks(dirB), sharedIndex: true });
    await nodeB.init();
    assert.equal((await nodeB.get('alice', onA.id)).id, onA.id, 'node B\'s start kept node A\'s workspace in the index');
    now += 8 * DAY;
    await nodeB.sweep(now);
    assert.equal((await nodeA.get('alice', onA.id)).id, onA.id, 'node B\'s sweep left it');
    await nodeA.sweep(now);
    assert.equal(await status(nodeA.get('alice', onA.id)), 404, 'node A, which holds its disk, swept it');
    index.close();
  });
});

describe('without disks (rootless Berth)', () => {
  it('every operation answers 503 saying workspaces need a rootful Berth', async () => {
    const rootless = build({ disks: undefined });
    for (const call of [rootless.create('alice'), rootless.list('alice'), rootless.get('alice', '00000000-0000-4000-8000-000000000001')]) {
      await assert.rejects(call, refused(/rootful Berth/, 503));
    }
    assert.equal(await rootless.sessionWorkspace('s'), undefined, 'sessions simply get none');
  });
});
