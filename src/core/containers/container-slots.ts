// How many agent containers may exist at once: in total (SERVICE_MAX_CONTAINERS) and per caller
// (SERVICE_MAX_CONTAINERS_PER_CALLER), runs, streams, async jobs and persistent agents together. Sync runs,
// streams and agents take a slot before anything is created and are refused when none is free (429 for
// the caller's own limit, 503 when the server is full); async jobs wait for one while they are pending.
// A run answered at its result (RunService.executeUntilAnswered) gives its caller's share back then
// (Slot.answered): the caller has its answer, and the engine's last writes and the container's removal
// are Berth's work. Until the container is gone the slot still counts against SERVICE_MAX_CONTAINERS, so
// the host never holds more containers than that limit says.
// With several nodes on one database (issue 26) the caller's limit is counted across the cluster: acquire()
// and wait() also take a place in the cluster's ledger (core/cluster/slots.ts), given back with the caller's
// share. The server's limit stays this host's. take() counts only here: for what exists already (a restart
// following its containers again) and the pool's engines, which belong to no caller.
import { errors } from '../../errors.js';
import type { CallerLedger, ClusterHold } from '../cluster/slots.js';

export interface SlotLimits {
  readonly total: number;
  readonly perCaller: number;
}

/** One container's place; release() and answered() are idempotent. */
export interface Slot {
  /** The container is gone: the place is free for everyone. */
  release(): void;
  /**
   * The caller was answered while its container is still being torn down: the caller's share is free now,
   * the host-wide place only at release().
   */
  answered(): void;
}

/** How long a job whose caller is at its limit elsewhere in the cluster waits before it asks again. */
const CLUSTER_RETRY_MS = 500;

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

  constructor(
    private readonly limits: SlotLimits,
    /** The cluster's count of each caller's containers (SERVICE_DATABASE_URL); absent: this process counts alone. */
    private readonly ledger?: CallerLedger,
  ) {}

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
      answered: () => slot.answered(),
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

  /**
   * A slot now, counted in the cluster too: the catalogue's 429 when the caller holds its limit on all nodes
   * together (503 BERTH_ERR_SLOTS_UNAVAILABLE when that cannot be counted). Without a ledger, take().
   */
  async acquire(owner: string): Promise<Slot> {
    const slot = this.take(owner);
    if (!this.ledger) return slot;
    let hold: ClusterHold | undefined;
    try {
      hold = await this.ledger.acquire('container', owner, this.limits.perCaller);
    } catch (error) {
      slot.release();
      throw error;
    }
    if (!hold) {
      slot.release();
      throw errors.tooManyContainers(this.limits.perCaller);
    }
    return withHold(slot, hold);
  }

  /**
   * wait(), counted in the cluster too: while the caller holds its limit on the other nodes, the local slot is
   * given back and asked for again every CLUSTER_RETRY_MS (a pending job waits, it is not refused).
   */
  async waitCounted(owner: string, signal: AbortSignal): Promise<Slot> {
    for (;;) {
      const slot = await this.wait(owner, signal);
      if (!this.ledger) return slot;
      let hold: ClusterHold | undefined;
      try {
        hold = await this.ledger.acquire('container', owner, this.limits.perCaller);
      } catch {
        hold = undefined;
      }
      if (hold) return withHold(slot, hold);
      slot.release();
      await pause(CLUSTER_RETRY_MS, signal);
    }
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

  /** Slots of this owner that count against its own limit now (answered runs being torn down do not). */
  heldBy(owner: string): number {
    return this.byOwner.get(owner) ?? 0;
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
    let callerShare = true;
    let released = false;
    const freeCallerShare = () => {
      if (!callerShare) return;
      callerShare = false;
      const left = (this.byOwner.get(owner) ?? 1) - 1;
      if (left === 0) this.byOwner.delete(owner);
      else this.byOwner.set(owner, left);
    };
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total -= 1;
        freeCallerShare();
        this.wakeWaiters();
      },
      answered: () => {
        if (released || !callerShare) return;
        freeCallerShare();
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

  /** Counted in the cluster too (ContainerSlots.acquire): for what is about to be created. */
  async acquire(): Promise<void> {
    if (this.held) return;
    const slot = await this.slots.acquire(this.owner);
    if (this.held) slot.release();
    else this.held = slot;
  }

  async wait(signal: AbortSignal): Promise<void> {
    if (this.held) return;
    const slot = await this.slots.waitCounted(this.owner, signal);
    if (this.held) slot.release();
    else this.held = slot;
  }

  /** The caller has its answer: its own limit no longer counts this run (the server's does until release()). */
  answered(): void {
    this.held?.answered();
  }

  release(): void {
    this.held?.release();
    this.held = undefined;
  }
}

/** `slot` whose caller share is also a place in the cluster: given back with that share. */
function withHold(slot: Slot, hold: ClusterHold): Slot {
  return {
    release: () => {
      hold.release();
      slot.release();
    },
    answered: () => {
      hold.release();
      slot.answered();
    },
  };
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted while waiting for a container slot'));
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new Error('aborted while waiting for a container slot'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
