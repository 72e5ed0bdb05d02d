// Blank workspace disks made ahead, so that a new session's own workspace (every new session gets one:
// core/runs/run-workspace.ts) costs no mkfs and no mounts on the request path. Measured on the 2-core test
// machine with the pool on (8 sequential runs each): the `workspace` phase of a new session's run was 41 ms
// p50 when its disk was made on the request path (truncate, mkfs.ext4, mount, layout, the view's bind and
// remount: four processes) against 17 ms for a run given an existing workspace (the checkpoint and the bind).
//
// A spare is an ordinary workspace disk under a fresh id that no index entry knows yet; WorkspaceService
// gives a new session-owned workspace that id. Spares are removed at stop; one a killed process left is
// removed at the next start like any disk the index does not know (WorkspaceService.init).
import { randomUUID } from 'node:crypto';
import type { MountedDisk, WorkspaceDisks } from './workspace-disks.js';

/** How long after a spare was taken the next one is made. */
const REFILL_DELAY_MS = 1_000;

export class SpareWorkspaceDisks {
  private readonly spares: MountedDisk[] = [];
  private making = 0;
  private closed = false;
  private refillTimer: NodeJS.Timeout | undefined;
  private readonly made = new Set<Promise<void>>();

  constructor(
    private readonly disks: WorkspaceDisks,
    /** How many blank disks to keep ready (the pools' sizes: one per engine waiting for a new session). */
    private readonly count: number,
    private readonly log?: (details: object, message: string) => void,
  ) {}

  create(id: string): Promise<MountedDisk> {
    return this.disks.create(id);
  }

  open(id: string): Promise<MountedDisk> {
    return this.disks.open(id);
  }

  exists(id: string): Promise<boolean> {
    return this.disks.exists(id);
  }

  remove(id: string): Promise<void> {
    return this.disks.remove(id);
  }

  list(): Promise<string[]> {
    return this.disks.list();
  }

  /** A blank disk, mounted and held for the caller (its id is the workspace's); undefined when none is ready. */
  takeSpare(): MountedDisk | undefined {
    const spare = this.spares.shift();
    // Not at once: the run that took it is starting its turn now, and a 2-core host has no CPU to spare.
    if (!this.refillTimer) {
      this.refillTimer = setTimeout(() => {
        this.refillTimer = undefined;
        this.refill();
      }, REFILL_DELAY_MS);
      this.refillTimer.unref();
    }
    return spare;
  }

  /** Starts making spares (after the index and the disks were reconciled, which would remove them). */
  start(): void {
    this.refill();
  }

  /** At stop, before the disks close: every spare unmounted and deleted. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refillTimer);
    await Promise.allSettled([...this.made]);
    for (const spare of this.spares.splice(0)) {
      spare.release();
      await this.disks.remove(spare.id).catch((error: unknown) => this.log?.({ err: error, workspace: spare.id }, 'could not remove a spare workspace disk'));
    }
  }

  private refill(): void {
    while (!this.closed && this.spares.length + this.making < this.count) {
      this.making += 1;
      const making = this.makeOne().finally(() => {
        this.making -= 1;
        this.made.delete(making);
      });
      this.made.add(making);
    }
  }

  private async makeOne(): Promise<void> {
    const id = randomUUID();
    try {
      const disk = await this.disks.create(id);
      if (this.closed) {
        disk.release();
        await this.disks.remove(id);
        return;
      }
      this.spares.push(disk);
    } catch (error) {
      // A full host disk, missing loop devices: new sessions make their disks on the request path as without spares.
      this.log?.({ err: error }, 'could not make a spare workspace disk');
    }
  }
}
