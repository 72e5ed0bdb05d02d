// A workspace's disk: one loop-mounted ext4 image per workspace (runtime/run-disk.ts), so that its size and
// its number of files are bounded by the file system itself: a run writing past it gets ENOSPC inside, an
// upload past it fails before anything is moved into place. docs/workspaces.md has the layout and numbers.
//
// Each disk is mounted twice while in use:
//   <dir>/<id>       the disk (`loop,nosuid,nodev,noatime`): its `tree/` is what a run binds at its workdir;
//   <dir>/<id>.view  a bind of the same file system, remounted `nosymfollow,nosuid,nodev,noexec`: every file
//                    operation of Berth's own goes through it, so the kernel refuses to follow any symlink a
//                    run planted, in any path component, even one swapped in mid-request (ELOOP).
// Disks are mounted on demand, counted by their users and unmounted about a minute after the last one left.
// A start unmounts whatever a previous process left mounted under <dir>; a stop unmounts every disk no lease
// holds (a lease that outlives the stop belongs to a run or agent that goes on without Berth).
import { chmod, chown, mkdir, readdir, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { UUID_PATTERN } from '../uuid.js';
import { DISK_IMAGE_SUFFIX, mountPoints, shareMountsBelow, unmount, unshareMountsBelow, type RunDisks } from './run-disk.js';
import { runHostCommand } from './host-commands.js';

const run = runHostCommand;

/** Suffix of a disk's nosymfollow view beside its mount point. */
export const VIEW_SUFFIX = '.view';
/** The workspace's files, below the disk's root. */
export const TREE_DIR = 'tree';
/** Berth's own part of the disk (checkpoints, staging), beside the tree: never visible to a run. */
export const INTERNAL_DIR = '.berth';
export const INTERNAL_SUBDIRS = ['checkpoints', 'tmp'] as const;

/** How long a disk nobody uses stays mounted (the next request then pays no mount). */
export const IDLE_UNMOUNT_MS = 60_000;

/**
 * Inodes of a workspace's file system: three per file the workspace may hold (its tree and two checkpoints)
 * plus a few for the layout, so the file system itself bounds the file count. ext4's inode table takes 256
 * bytes an inode; on a small disk it is capped at an eighth of the disk (then the disk fills before
 * maxFiles is reached: 64m holds 32,768 inodes).
 */
export function workspaceInodes(bytes: number, maxFiles: number): number {
  return Math.min(3 * maxFiles + 64, Math.floor(bytes / (8 * 256)));
}

/** A mounted workspace disk's host paths; valid until `release()`. */
export interface MountedDisk {
  readonly id: string;
  /** The disk mount (links are followed here: only for binding the tree at a run's workdir). */
  readonly mountPoint: string;
  /** The nosymfollow view of the same file system: for every file operation of Berth's. */
  readonly view: string;
  /** Gives this user's reference back; the disk is unmounted IDLE_UNMOUNT_MS after the last. Idempotent. */
  release(): void;
}

export interface WorkspaceDiskSettings {
  /** Where disks are mounted (`<sessionsDir>/.workspaces`); Berth's own, root only. */
  readonly dir: string;
  readonly bytes: number;
  /** Inodes of each file system (the file-count bound, checkpoints included). */
  readonly inodes: number;
  /** Host uid and gid that own the tree (the container's file owner, mapped). */
  readonly treeOwner: { readonly uid: number; readonly gid: number };
  readonly idleUnmountMs?: number;
  readonly log?: (details: object, message: string) => void;
}

interface MountState {
  refs: number;
  idle?: NodeJS.Timeout;
  /** Set while mounting: later users wait for the same mount. */
  mounting?: Promise<void>;
}

export class WorkspaceDisks {
  private readonly mounts = new Map<string, MountState>();
  /** Disks being removed: not mounted again meanwhile (a mount then would outlive its image). */
  private readonly removing = new Set<string>();
  /** Idle unmounts in progress: a new user waits for one before mounting again. */
  private readonly unmounting = new Map<string, Promise<void>>();
  private closed = false;

  constructor(
    private readonly disks: RunDisks,
    private readonly settings: WorkspaceDiskSettings,
  ) {}

  /** Makes the directory and unmounts every view and disk a previous process left mounted under it. */
  async init(): Promise<void> {
    await mkdir(this.settings.dir, { recursive: true, mode: 0o700 });
    await chmod(this.settings.dir, 0o700);
    const prefix = `${this.settings.dir}/`;
    // Views first (and deeper paths before shallower): a view is a bind of its disk.
    const left = [...(await mountPoints())].filter((path) => path.startsWith(prefix)).sort((a, b) => b.length - a.length);
    for (const path of left) await unmount(path).catch((error: unknown) => this.settings.log?.({ err: error, path }, 'could not unmount a workspace disk left by a previous process'));
    if (left.length > 0) this.settings.log?.({ mounts: left.length }, 'unmounted workspace disks a previous process left');
    // A disk's unmount then also reaches the copies other processes' mount namespaces hold (run-disk.ts).
    await shareMountsBelow(this.settings.dir);
  }

  /** Makes a new workspace's disk with its layout and returns it mounted (one reference). */
  async create(id: string): Promise<MountedDisk> {
    const state: MountState = { refs: 1 };
    this.mounts.set(id, state);
    const mountPoint = this.mountPoint(id);
    const creating = (async () => {
      await this.disks.create(mountPoint, this.settings.bytes, { bare: true, inodes: this.settings.inodes });
      try {
        const tree = join(mountPoint, TREE_DIR);
        await mkdir(tree, { mode: 0o755 });
        await chown(tree, this.settings.treeOwner.uid, this.settings.treeOwner.gid);
        await chmod(tree, 0o755);
        await mkdir(join(mountPoint, INTERNAL_DIR), { mode: 0o700 });
        for (const sub of INTERNAL_SUBDIRS) await mkdir(join(mountPoint, INTERNAL_DIR, sub), { mode: 0o700 });
        await this.mountView(id);
      } catch (error) {
        await this.unmountBoth(id).catch(() => undefined);
        await this.disks.release(mountPoint).catch(() => undefined);
        throw error;
      }
    })();
    state.mounting = creating;
    try {
      await creating;
    } catch (error) {
      this.mounts.delete(id);
      await rmdir(mountPoint).catch(() => undefined);
      throw error;
    } finally {
      delete state.mounting;
    }
    return this.handle(id, state);
  }

  /** Whether the workspace's disk image exists. */
  async exists(id: string): Promise<boolean> {
    return stat(this.image(id)).then(() => true, () => false);
  }

  /** The workspace's disk, mounted (now, or already) for one more user. */
  async open(id: string): Promise<MountedDisk> {
    if (this.closed) throw new Error('workspace disks are closed (Berth is stopping)');
    if (this.removing.has(id)) throw new Error(`workspace ${id} is being removed`);
    let state = this.mounts.get(id);
    if (state === undefined) {
      state = { refs: 0 };
      this.mounts.set(id, state);
      const mounting = this.mountExisting(id);
      state.mounting = mounting;
      mounting.finally(() => delete state!.mounting).catch(() => undefined);
    }
    state.refs += 1;
    if (state.idle !== undefined) {
      clearTimeout(state.idle);
      delete state.idle;
    }
    try {
      if (state.mounting) await state.mounting;
    } catch (error) {
      state.refs -= 1;
      if (this.mounts.get(id) === state && state.refs === 0) this.mounts.delete(id);
      throw error;
    }
    return this.handle(id, state);
  }

  /** Whether anyone holds the workspace's disk now. */
  inUse(id: string): boolean {
    return (this.mounts.get(id)?.refs ?? 0) > 0;
  }

  /** Unmounts and deletes the workspace's disk (its users must be gone). Idempotent. */
  async remove(id: string): Promise<void> {
    this.removing.add(id);
    try {
      await this.unmounting.get(id);
      const state = this.mounts.get(id);
      if (state?.mounting) await state.mounting.catch(() => undefined);
      if (state?.idle !== undefined) clearTimeout(state.idle);
      this.mounts.delete(id);
      await this.unmountBoth(id);
      await this.disks.release(this.mountPoint(id));
      await rmdir(this.mountPoint(id)).catch(() => undefined);
      await rmdir(this.viewPath(id)).catch(() => undefined);
    } finally {
      this.removing.delete(id);
    }
  }

  /** Workspace ids that have a disk image here (for reconciling with the index). */
  async list(): Promise<string[]> {
    const entries = await readdir(this.settings.dir).catch(() => [] as string[]);
    return entries.filter((name) => name.endsWith(DISK_IMAGE_SUFFIX)).map((name) => name.slice(0, -DISK_IMAGE_SUFFIX.length));
  }

  /** At stop: unmounts every disk nobody holds; ones still held stay (their lease's run or agent goes on). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.unmounting.values());
    for (const [id, state] of [...this.mounts]) {
      if (state.idle !== undefined) clearTimeout(state.idle);
      if (state.mounting) await state.mounting.catch(() => undefined);
      if (state.refs > 0) {
        this.settings.log?.({ workspace: id, users: state.refs }, 'workspace disk left mounted at stop: a run or agent still holds it');
        continue;
      }
      this.mounts.delete(id);
      await this.unmountBoth(id).catch((error: unknown) => this.settings.log?.({ err: error, workspace: id }, 'could not unmount a workspace disk'));
    }
    await unshareMountsBelow(this.settings.dir).catch((error: unknown) => this.settings.log?.({ err: error }, 'could not unmount the workspaces directory'));
  }

  private handle(id: string, state: MountState): MountedDisk {
    let released = false;
    return {
      id,
      mountPoint: this.mountPoint(id),
      view: this.viewPath(id),
      release: () => {
        if (released) return;
        released = true;
        state.refs -= 1;
        if (state.refs > 0 || this.mounts.get(id) !== state) return;
        const idle = setTimeout(() => {
          if (state.refs > 0 || this.mounts.get(id) !== state) return;
          this.mounts.delete(id);
          const unmounting = this.unmountBoth(id)
            .catch((error: unknown) => this.settings.log?.({ err: error, workspace: id }, 'could not unmount an idle workspace disk'))
            .finally(() => {
              if (this.unmounting.get(id) === unmounting) this.unmounting.delete(id);
            });
          this.unmounting.set(id, unmounting);
        }, this.settings.idleUnmountMs ?? IDLE_UNMOUNT_MS);
        idle.unref();
        state.idle = idle;
      },
    };
  }

  private async mountExisting(id: string): Promise<void> {
    // An idle unmount still under way would take away what this mount finds in place.
    await this.unmounting.get(id);
    const mountPoint = this.mountPoint(id);
    const mounted = await mountPoints();
    if (!mounted.has(mountPoint)) {
      if (!(await this.exists(id))) throw new Error(`workspace ${id} has no disk`);
      await mkdir(mountPoint, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST') throw error;
      });
      // util-linux reuses a loop device already attached to this image (a run still holding it after a
      // restart), so the file system is never mounted through two devices at once.
      await run('mount', ['-t', 'ext4', '-o', 'loop,nosuid,nodev,noatime', this.image(id), mountPoint]);
    }
    if (!mounted.has(this.viewPath(id))) {
      try {
        await this.mountView(id);
      } catch (error) {
        await unmount(mountPoint).catch(() => undefined);
        throw error;
      }
    }
  }

  private async mountView(id: string): Promise<void> {
    const view = this.viewPath(id);
    await mkdir(view, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    await run('mount', ['--bind', this.mountPoint(id), view]);
    try {
      await run('mount', ['-o', 'remount,bind,nosymfollow,nosuid,nodev,noexec', view]);
    } catch (error) {
      // A view that would follow links is no view: never left in place.
      await unmount(view).catch(() => undefined);
      throw error;
    }
  }

  private async unmountBoth(id: string): Promise<void> {
    const mounted = await mountPoints();
    for (const path of [this.viewPath(id), this.mountPoint(id)]) if (mounted.has(path)) await unmount(path);
  }

  private image(id: string): string {
    return `${this.mountPoint(id)}${DISK_IMAGE_SUFFIX}`;
  }

  private viewPath(id: string): string {
    return `${this.mountPoint(id)}${VIEW_SUFFIX}`;
  }

  private mountPoint(id: string): string {
    // Workspace ids are Berth's own UUIDs (checked before any path is made from one).
    if (!UUID_PATTERN.test(id)) throw new Error(`not a workspace id: ${id}`);
    return join(this.settings.dir, id);
  }
}

/**
 * Puts a workspace's tree at `target` (a run's workdir directory on the host): a bind mount, remounted
 * `nosuid,nodev` (a run can neither gain privileges nor open devices through files it finds there).
 */
export async function bindTree(treeHostPath: string, target: string): Promise<void> {
  // One mount(8) (util-linux ≥ 2.27) makes the bind and remounts it nosuid,nodev: a second process on every
  // pooled run's claim cost it 5–20 ms on 2 cores. A bind it made without the flags is taken away again.
  try {
    await run('mount', ['--bind', '-o', 'nosuid,nodev', treeHostPath, target]);
  } catch (error) {
    if ((await mountPoints()).has(target)) await unmount(target).catch(() => undefined);
    throw error;
  }
}

/** Takes a tree bound by bindTree away from `target` again; idempotent. */
export async function unbindTree(target: string): Promise<void> {
  if ((await mountPoints()).has(target)) await unmount(target);
}

