// Per-caller limits counted across the cluster (issue 26): with several nodes on one database, a caller's
// containers (SERVICE_MAX_CONTAINERS_PER_CALLER) and compose stacks (SERVICE_COMPOSE_MAX_STACKS_PER_CALLER)
// are counted on every node, not per process. Each place is a row of the slot store, acquired under a
// per-caller lock that counts the places of nodes with a live lease (store/slots/postgres-slot-store.ts) and
// deleted when the place is given back. The host-wide limits (SERVICE_MAX_CONTAINERS, SERVICE_COMPOSE_MAX_STACKS)
// stay per node: they bound one host's resources.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { errors } from '../../errors.js';
import type { SlotKind, SlotStore } from '../../store/slots/slot-store.js';

/** One place recorded in the cluster; release() is idempotent and never throws (a failed delete is logged). */
export interface ClusterHold {
  release(): void;
}

/** What the in-process counters ask of the cluster (core/containers/container-slots.ts, core/compose/stacks.ts). */
export interface CallerLedger {
  /**
   * A place of `kind` for `caller` when the cluster holds fewer than `limit` of them, undefined at the limit.
   * Rejects with BERTH_ERR_SLOTS_UNAVAILABLE (503) when the database does not answer: a limit that cannot be
   * counted refuses rather than admits.
   */
  acquire(kind: SlotKind, caller: string, limit: number): Promise<ClusterHold | undefined>;
}

export class ClusterSlots implements CallerLedger {
  /** Deletes still on their way, per kind and caller: the caller's next acquisition waits for them. */
  private readonly releasing = new Map<string, Set<Promise<void>>>();

  constructor(
    private readonly store: SlotStore,
    private readonly log: Logger,
  ) {}

  /** At start: the places the process before left on this node are deleted (what survives is counted again). */
  async clearLeftovers(): Promise<void> {
    const cleared = await this.store.clearNode();
    if (cleared > 0) this.log.info({ count: cleared }, 'container places left by the previous process deleted from the cluster\'s count');
  }

  async acquire(kind: SlotKind, caller: string, limit: number): Promise<ClusterHold | undefined> {
    // A caller answered at the end of its run asks again at once: the place it gave back must not count.
    const pending = this.releasing.get(keyOf(kind, caller));
    if (pending) await Promise.allSettled([...pending]);
    const holder = randomUUID();
    let acquired: boolean;
    try {
      acquired = await this.store.acquire(kind, caller, holder, limit);
    } catch (error) {
      this.log.error({ err: error, caller, kind }, 'a container place could not be counted in the cluster');
      throw errors.slotsUnavailable((error as Error).message);
    }
    if (!acquired) return undefined;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.track(kind, caller, this.store.release(holder).catch((error: unknown) => {
          // The row stays counted until this node restarts or its lease lapses: the caller's limit is lower
          // by one meanwhile, never higher.
          this.log.error({ err: error, caller, kind, holder }, 'a container place could not be given back to the cluster\'s count');
        }));
      },
    };
  }

  /** Resolves once every place given back has been deleted (at stop, before the store closes). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.releasing.values()].flatMap((set) => [...set]));
  }

  private track(kind: SlotKind, caller: string, deletion: Promise<void>): void {
    const key = keyOf(kind, caller);
    let set = this.releasing.get(key);
    if (!set) {
      set = new Set();
      this.releasing.set(key, set);
    }
    set.add(deletion);
    void deletion.finally(() => {
      set.delete(deletion);
      if (set.size === 0 && this.releasing.get(key) === set) this.releasing.delete(key);
    });
  }
}

const keyOf = (kind: SlotKind, caller: string) => `${kind}\0${caller}`;
