// Workspace disks on this host's real loop devices (root): the layout a new disk gets, the nosymfollow view,
// mounts counted by their users and unmounted once idle, what a start and a stop leave mounted, and the
// bind that puts a tree at a run's workdir.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { LoopDisks, mountPoints, unshareMountsBelow } from '../../src/runtime/run-disk.js';
import { WorkspaceDisks, bindTree, unbindTree, workspaceInodes } from '../../src/runtime/workspace-disks.js';
import { removeTestDir } from '../support/test-dir.js';
import { leftAfterStop } from '../support/workspaces.js';

let dir: string;
const OWNER = { uid: 701_000, gid: 701_000 };
const settings = (idleUnmountMs: number) => ({ dir: join(dir, '.workspaces'), bytes: 16 * 1024 * 1024, inodes: workspaceInodes(16 * 1024 * 1024, 100), treeOwner: OWNER, idleUnmountMs });

/** The mount options of `path` (per-mount and super-block), from /proc/self/mountinfo. */
async function mountOptions(path: string): Promise<string[]> {
  const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((entry) => entry.split(' ')[4] === path);
  assert.ok(line, `${path} is mounted`);
  return line.split(' ')[5]!.split(',');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-test-disks-'));
});
after(async () => {
  // What the last instance's close() does: the directory's shared bind of itself goes once nothing is below it.
  await unshareMountsBelow(join(dir, '.workspaces'));
  const left = await leftAfterStop(dir);
  await removeTestDir(dir);
  assert.deepEqual(left, { mounts: [], loops: [] });
});

describe('a new workspace disk', () => {
  it('has the tree owned by the container user beside Berth\'s root-only part, and a nosymfollow view', async () => {
    const disks = new WorkspaceDisks(new LoopDisks(), settings(60_000));
    await disks.init();
    const id = randomUUID();
    const disk = await disks.create(id);
    const tree = await lstat(join(disk.mountPoint, 'tree'));
    assert.deepEqual([tree.uid, tree.gid, tree.mode & 0o7777], [OWNER.uid, OWNER.gid, 0o755]);
    for (const sub of ['.berth', '.berth/checkpoints', '.berth/tmp']) {
      const stats = await lstat(join(disk.mountPoint, sub));
      assert.deepEqual([stats.uid, stats.mode & 0o7777], [0, 0o700], sub);
    }
    assert.ok((await mountOptions(disk.mountPoint)).includes('nosuid'));
    const view = await mountOptions(disk.view);
    for (const option of ['nosymfollow', 'nosuid', 'nodev', 'noexec']) assert.ok(view.includes(option), `view: ${view.join(',')}`);
    // The same file system: a file written on the disk is read on the view; a link is followed on the disk only.
    await writeFile(join(disk.mountPoint, 'tree', 'a.txt'), 'same');
    await symlink('a.txt', join(disk.mountPoint, 'tree', 'link'));
    assert.equal(await readFile(join(disk.view, 'tree', 'a.txt'), 'utf8'), 'same');
    assert.equal(await readFile(join(disk.mountPoint, 'tree', 'link'), 'utf8'), 'same');
    await assert.rejects(readFile(join(disk.view, 'tree', 'link')), { code: 'ELOOP' });
    disk.release();
    await disks.remove(id);
    assert.deepEqual(await disks.list(), []);
  });
});

describe('mounts on demand', () => {
  it('stay mounted while used, unmount once idle, and mount again when opened', async () => {
    const disks = new WorkspaceDisks(new LoopDisks(), settings(200));
    await disks.init();
    const id = randomUUID();
    (await disks.create(id)).release();
    const first = await disks.open(id);
    const second = await disks.open(id);
    first.release();
    first.release();
    await sleep(400);
    assert.ok((await mountPoints()).has(second.mountPoint), 'still held by the second user');
    second.release();
    await sleep(400);
    const mounted = await mountPoints();
    assert.ok(!mounted.has(second.mountPoint) && !mounted.has(second.view), 'unmounted once idle');
    const again = await disks.open(id);
    await writeFile(join(again.mountPoint, 'tree', 'b.txt'), 'kept');
    assert.equal(await readFile(join(again.view, 'tree', 'b.txt'), 'utf8'), 'kept');
    again.release();
    await disks.remove(id);
  });

  it('a user who opens the disk while an idle unmount is under way finds it mounted', async () => {
    const disks = new WorkspaceDisks(new LoopDisks(), settings(1));
    await disks.init();
    const id = randomUUID();
    const created = await disks.create(id);
    await writeFile(join(created.mountPoint, 'tree', 'probe'), 'mounted');
    created.release();
    for (let round = 0; round < 40; round += 1) {
      // Let the 1 ms idle timer fire (its unmount starts), then open at once.
      await sleep(round % 5);
      const disk = await disks.open(id);
      assert.equal(await readFile(join(disk.view, 'tree', 'probe'), 'utf8'), 'mounted', `round ${round}`);
      disk.release();
    }
    await disks.remove(id);
  });

  it('a stop unmounts what nobody holds and keeps what a lease holds; the next start unmounts what is left', async () => {
    const disks = new WorkspaceDisks(new LoopDisks(), settings(60_000));
    await disks.init();
    const [idle, held] = [randomUUID(), randomUUID()];
    (await disks.create(idle)).release();
    const holder = await disks.create(held);
    await disks.close();
    let mounted = await mountPoints();
    assert.ok(!mounted.has(join(dir, '.workspaces', idle)));
    assert.ok(mounted.has(holder.mountPoint) && mounted.has(holder.view), 'the held disk stays for its run');
    await assert.rejects(disks.open(idle), /closed/);
    const next = new WorkspaceDisks(new LoopDisks(), settings(60_000));
    await next.init();
    mounted = await mountPoints();
    assert.ok(!mounted.has(holder.mountPoint) && !mounted.has(holder.view));
    assert.deepEqual((await next.list()).sort(), [idle, held].sort(), 'the images stay');
    const reopened = await next.open(held);
    reopened.release();
    await next.remove(idle);
    await next.remove(held);
  });
});

describe('a tree bound at a run\'s workdir', () => {
  it('is the same tree, nosuid and nodev, and unbinding twice is harmless', async () => {
    const disks = new WorkspaceDisks(new LoopDisks(), settings(60_000));
    await disks.init();
    const id = randomUUID();
    const disk = await disks.create(id);
    const workdir = join(dir, 'run-workdir');
    await mkdir(workdir);
    await bindTree(join(disk.mountPoint, 'tree'), workdir);
    const options = await mountOptions(workdir);
    assert.ok(options.includes('nosuid') && options.includes('nodev'), options.join(','));
    await writeFile(join(workdir, 'from-run.txt'), 'written at the workdir');
    assert.equal(await readFile(join(disk.view, 'tree', 'from-run.txt'), 'utf8'), 'written at the workdir');
    await unbindTree(workdir);
    await unbindTree(workdir);
    assert.ok(!(await mountPoints()).has(workdir));
    disk.release();
    await disks.remove(id);
  });
});
