// A compose stack's disk: one file system (runtime/run-disk.ts, loop ext4) per stack holding everything its
// services can write: its named volumes and each service's /tmp, /var/tmp and /run (volumes whose data
// directories are bound to directories of the disk: runtime/podman/volume-backing.ts). The services' root
// file systems are read-only, so a write past the disk's size fails with ENOSPC inside the stack.
//
// Stacks outlive Berth's process (a stop leaves them running), so their disks stay mounted across a stop:
// the disk of `<dir>/<session id>` is found again at start by its directory, like the stack by its labels.
import { mkdir, readdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DISK_IMAGE_SUFFIX, isMountPoint, type RunDisks } from './run-disk.js';

export class StackDisks {
  constructor(
    /** Where the disks are mounted (one directory per session, its image beside it); Berth's own. */
    private readonly dir: string,
    private readonly disks: RunDisks,
    readonly bytes: number,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** Makes and mounts the stack's disk (none may exist for the session). */
  async create(sessionId: string): Promise<void> {
    await this.disks.create(this.mountPoint(sessionId), this.bytes, { bare: true });
  }

  /** A directory of the stack's disk for one volume (created), as Berth sees it. */
  async volumeDir(sessionId: string, volume: string): Promise<string> {
    const dir = join(this.mountPoint(sessionId), 'volumes', volume);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    return dir;
  }

  /** Whether the session's disk is mounted (false after a host restart: its stack cannot be kept as bounded). */
  async mounted(sessionId: string): Promise<boolean> {
    return isMountPoint(this.mountPoint(sessionId));
  }

  /** Unmounts and removes the session's disk, if it has one. Idempotent. */
  async release(sessionId: string): Promise<void> {
    const mountPoint = this.mountPoint(sessionId);
    await this.disks.release(mountPoint);
    await rmdir(mountPoint).catch(() => undefined);
  }

  /** Sessions that have a disk (mounted or only its image left), for the reaping at start. */
  async sessions(): Promise<string[]> {
    const entries = await readdir(this.dir).catch(() => [] as string[]);
    return [...new Set(entries.map((name) => (name.endsWith(DISK_IMAGE_SUFFIX) ? name.slice(0, -DISK_IMAGE_SUFFIX.length) : name)))];
  }

  private mountPoint(sessionId: string): string {
    // Session ids are Berth's own (checked before a stack is made); no path may leave the directory.
    if (!/^[A-Za-z0-9_.-]+$/.test(sessionId) || sessionId.startsWith('.')) throw new Error(`not a session id: ${sessionId}`);
    return join(this.dir, sessionId);
  }
}
