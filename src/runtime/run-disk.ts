// A run's disk: a file system of its own, the size the run asked for, so that everything the run can write is
// bounded by the file system itself (a write past it fails with ENOSPC), not checked afterwards.
//
// Why a loop-mounted ext4 image per run (docs/disk.md has the numbers): the host's graphroot is ext4, so
// Podman's overlay `size=` (XFS with pquota only) is out, and this kernel has no quota support at all ("XFS:
// quota support not available in this kernel"), so project quotas on one shared XFS pool are out too. An
// ext4 image without a journal is a sparse file of about 1.2 MB until written; making, mounting and later
// unmounting it costs about 23 ms here, and the host's space it takes can never exceed its size.
//
// The image sits beside its mount point (`<mountPoint>.disk`); `mount -o loop` sets the loop device to clear
// itself when the last user of the file system is gone, so an unmount (or the end of the container that
// still holds it) frees the device, and removing the image frees the space.
import { chmod, mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { runHostCommand } from './host-commands.js';

const run = runHostCommand;

/** The image file of the disk mounted at `mountPoint`. */
export const DISK_IMAGE_SUFFIX = '.disk';

/** Directories of a run's disk for the container's writable places, below its root (the engine's config dir). */
export const WRITABLE_DIR = '.berth-writable';
export const WRITABLE_PLACES = ['workdir', 'tmp', 'var-tmp', 'home'] as const;
export type WritablePlace = (typeof WRITABLE_PLACES)[number];

/** Makes, mounts and releases run disks; one implementation (loop ext4), a fake in unit tests. */
export interface RunDisks {
  /**
   * Creates a file system of `bytes` and mounts it at `mountPoint` (created; must not exist), world-writable
   * with the run's writable places; `bare`: only the empty file system, its root root's (stacks, builds,
   * workspaces); `inodes`: the file system's exact number of inodes (its file-count bound; mkfs's default
   * otherwise, one per 16 KiB).
   */
  create(mountPoint: string, bytes: number, options?: DiskOptions): Promise<void>;
  /** Unmounts the disk at `mountPoint` (if mounted) and removes its image; the mount point stays. Idempotent. */
  release(mountPoint: string): Promise<void>;
  /** At start: disks mounted below `dir` from now on are unmounted everywhere at release (shareMountsBelow). */
  shareBelow?(dir: string): Promise<void>;
}

export interface DiskOptions {
  readonly bare?: boolean;
  readonly inodes?: number;
}

/** Host paths of a disk's writable places (as the container runtime sees the host). */
export function writablePaths(hostMountPoint: string): Record<WritablePlace, string> {
  return Object.fromEntries(WRITABLE_PLACES.map((place) => [place, join(hostMountPoint, WRITABLE_DIR, place)])) as Record<WritablePlace, string>;
}

export class LoopDisks implements RunDisks {
  /** Whether this host can make run disks (root, loop devices, mkfs.ext4); the reason when it cannot. */
  static async unavailable(): Promise<string | undefined> {
    if (process.getuid?.() !== 0) return 'Berth does not run as root (rootless Podman): it cannot mount file systems';
    const loop = await readFile('/proc/devices', 'utf8').then((text) => /^\s*7 loop$/m.test(text), () => false);
    if (!loop) return 'the kernel has no loop devices';
    return run('mkfs.ext4', ['-V']).then(() => undefined, () => 'mkfs.ext4 is missing (Debian package e2fsprogs)');
  }

  async create(mountPoint: string, bytes: number, options: DiskOptions = {}): Promise<void> {
    const image = `${mountPoint}${DISK_IMAGE_SUFFIX}`;
    // 'wx': a leftover image of the same name is never reused (its file system is not ours to trust).
    const file = await open(image, 'wx', 0o600);
    try {
      await file.truncate(bytes);
    } finally {
      await file.close();
    }
    let mounted = false;
    try {
      // No journal: the disk lives as long as its run; lazy inode tables and no discard keep mkfs at a few ms.
      const inodes = options.inodes === undefined ? [] : ['-N', String(options.inodes)];
      await run('mkfs.ext4', ['-q', '-F', '-O', '^has_journal', '-E', 'lazy_itable_init=1,nodiscard', '-m', '0', ...inodes, image]);
      await mkdir(mountPoint, { mode: 0o700 });
      await run('mount', ['-t', 'ext4', '-o', 'loop,nosuid,nodev,noatime', image, mountPoint]);
      mounted = true;
      // Written by whichever user the image runs as (mapped to unprivileged host ids); only Berth reaches the
      // mount point's parent on the host.
      await rm(join(mountPoint, 'lost+found'), { recursive: true, force: true });
      if (options.bare === true) return;
      // Shared: a workspace bound below it later (core/runs/run-workspace.ts) also reaches a container that
      // already mounts its workdir with `rslave` propagation (a pooled engine's). Nothing flows back: the
      // container's side is a slave.
      await run('mount', ['--make-shared', mountPoint]);
      await chmod(mountPoint, 0o777);
      await mkdir(join(mountPoint, WRITABLE_DIR), { mode: 0o755 });
      for (const place of WRITABLE_PLACES) {
        const dir = join(mountPoint, WRITABLE_DIR, place);
        await mkdir(dir);
        // /tmp's sticky bit, as every /tmp has.
        await chmod(dir, place === 'tmp' || place === 'var-tmp' ? 0o1777 : 0o777);
      }
    } catch (error) {
      // `mount` can be killed after the kernel mounted (a terminal's Ctrl-C reaches Berth's children too):
      // what counts is the mount table, not whether the command said so.
      if (mounted || (await isMountPoint(mountPoint).catch(() => false))) await unmount(mountPoint).catch(() => undefined);
      await rm(image, { force: true });
      throw error;
    }
  }

  async release(mountPoint: string): Promise<void> {
    if (await isMountPoint(mountPoint)) await unmount(mountPoint);
    await rm(`${mountPoint}${DISK_IMAGE_SUFFIX}`, { force: true });
  }

  shareBelow(dir: string): Promise<void> {
    return shareMountsBelow(dir);
  }
}

/**
 * Makes `dir` a shared mount (a bind of itself), so that an unmount below it reaches every copy of the mount.
 *
 * Why: every container's conmon runs in a mount namespace of its own, copied from the host's when it starts,
 * and such a copy holds every file system mounted at that moment, the disks of runs and workspaces included.
 * Below a private parent (`/` is private here) Berth's later unmount does not reach the copy, so the file
 * system, its loop device and a removed image's space stay taken until that container ends, which for a
 * persistent agent may be days (seen: workspace disks of finished tests still attached, held by the conmon
 * of another test's pooled engine). Below a shared parent the copies are peers: the unmount reaches them and
 * the loop device is freed at once. Nothing is done when `dir` has mounts below it but is no mount itself
 * (disks a previous process left for runs it follows): binding over them would hide them.
 */
export async function shareMountsBelow(dir: string): Promise<void> {
  const mounted = await mountPoints();
  if (!mounted.has(dir)) {
    if ([...mounted].some((path) => path.startsWith(`${dir}/`))) return;
    await run('mount', ['--bind', dir, dir]);
  }
  await run('mount', ['--make-shared', dir]);
}

/** At stop: undoes shareMountsBelow when nothing is mounted below `dir` any more; kept for the next start otherwise. */
export async function unshareMountsBelow(dir: string): Promise<void> {
  const mounted = await mountPoints();
  if (!mounted.has(dir) || [...mounted].some((path) => path.startsWith(`${dir}/`))) return;
  await unmount(dir);
}

/** Unmounts `mountPoint`; a busy one is detached (lazily unmounted) instead. */
export async function unmount(mountPoint: string): Promise<void> {
  try {
    await run('umount', [mountPoint]);
  } catch {
    // Busy (a reader of Berth's still open inside): detach now, the file system goes with its last user.
    await run('umount', ['-l', mountPoint]);
  }
}

/** Whether `path` is a mount point in Berth's mount namespace (from /proc/self/mountinfo, octal escapes decoded). */
export async function isMountPoint(path: string): Promise<boolean> {
  return (await mountPoints()).has(path);
}

export async function mountPoints(): Promise<Set<string>> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  return new Set(
    table
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(' ')[4]!.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))),
  );
}
