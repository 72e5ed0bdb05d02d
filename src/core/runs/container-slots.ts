// How many agent containers may exist at once: in total (SERVICE_MAX_CONTAINERS) and per caller
// (SERVICE_MAX_CONTAINERS_PER_CALLER), runs, streams, async jobs and persistent agents together. Sync runs,
// streams and agents take a slot before anything is created and are refused when none is free (429 for
// the caller's own limit, 503 when the server is full); async jobs wait for one while they are pending.
import { errors } from '../../errors.js';

export interface SlotLimits {
  readonly total: number;
  readonly perCaller: number;
}

/** One container's place; release() is idempotent. */
export interface Slot {
  release(): void;
}

interface Waiter {
  readonly owner: string;
  readonly grant: (slot: Slot) => void;
}

export class ContainerSlots {
  private total = 0;
  private readonly byOwner = new Map<string, number>();
  private readonly waiters: Waiter[] = [];
  /** Slots held by pre-started engines (core/pool): given up to a run when the server is otherwise full. */
  private readonly reclaimable: { readonly slot: Slot; readonly reclaim: () => void }[] = [];

  constructor(private readonly limits: SlotLimits) {}

  /**
   * A slot that a run may take over when the server is full (`reclaim` is then called, once, and the slot
   * is gone); undefined when there is no free slot now.
   */
  takeReclaimable(owner: string, reclaim: () => void): Slot | undefined {
    if (this.fullFor(owner) !== undefined) return undefined;
    const slot = this.grant(owner);
    const entry = { slot, reclaim };
    this.reclaimable.push(entry);
    return {
      release: () => {
        const index = this.reclaimable.indexOf(entry);
        if (index >= 0) this.reclaimable.splice(index, 1);
        slot.release();
      },
    };
  }

  /** A slot now, or the catalogue's 429 (the caller's limit) / 503 (the server's). */
  take(owner: string): Slot {
    this.reclaimIfFull(owner);
    const full = this.fullFor(owner);
    if (full === 'caller') throw errors.tooManyContainers(this.limits.perCaller);
    if (full === 'server') throw errors.atCapacity(this.limits.total);
    return this.grant(owner);
  }

  /** A slot as soon as one is free for this owner (in arrival order); rejects when the signal aborts. */
  wait(owner: string, signal: AbortSignal): Promise<Slot> {
    this.reclaimIfFull(owner);
    if (this.fullFor(owner) === undefined && !this.waiters.some((w) => w.owner === owner)) return Promise.resolve(this.grant(owner));
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        owner,
        grant: (slot) => {
          signal.removeEventListener('abort', onAbort);
          resolve(slot);
        },
      };
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted while waiting for a container slot'));
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  get inUse(): number {
    return this.total;
  }

  /** A full server gives a pre-started engine's slot to this owner's run (the engine is removed). */
  private reclaimIfFull(owner: string): void {
    if (this.fullFor(owner) !== 'server') return;
    const entry = this.reclaimable.shift();
    if (!entry) return;
    entry.slot.release();
    entry.reclaim();
  }

  private fullFor(owner: string): 'caller' | 'server' | undefined {
    if ((this.byOwner.get(owner) ?? 0) >= this.limits.perCaller) return 'caller';
    if (this.total >= this.limits.total) return 'server';
    return undefined;
  }

  private grant(owner: string): Slot {
    this.total += 1;
    this.byOwner.set(owner, (this.byOwner.get(owner) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total -= 1;
        const left = (this.byOwner.get(owner) ?? 1) - 1;
        if (left === 0) this.byOwner.delete(owner);
        else this.byOwner.set(owner, left);
        this.wakeWaiters();
      },
    };
  }

  /** Hands freed slots to the first waiters that fit, in arrival order. */
  private wakeWaiters(): void {
    for (let index = 0; index < this.waiters.length; ) {
      const waiter = this.waiters[index]!;
      if (this.fullFor(waiter.owner) === undefined) {
        this.waiters.splice(index, 1);
        waiter.grant(this.grant(waiter.owner));
      } else index += 1;
    }
  }
}

/**
 * The slot of one accepted run or agent: taken at acceptance (sync runs, streams, agents) or awaited
 * later (async jobs, while pending), released when its container is gone.
 */
export class RunSlot {
  private held: Slot | undefined;

  constructor(
    private readonly slots: ContainerSlots,
    readonly owner: string,
  ) {}

  take(): void {
    this.held ??= this.slots.take(this.owner);
  }

  async wait(signal: AbortSignal): Promise<void> {
    this.held ??= await this.slots.wait(this.owner, signal);
  }

  release(): void {
    this.held?.release();
    this.held = undefined;
  }
}
