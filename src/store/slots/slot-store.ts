// Places (containers, compose stacks) held by callers across the nodes sharing one database (issue 26): what a
// per-caller limit counts when several nodes run one caller's containers. Only PostgreSQL has it: a single
// node counts in its own memory (core/containers/container-slots.ts).

/** What a place is for: one container (runs, agents, clones, stack services) or one compose stack. */
export type SlotKind = 'container' | 'stack';

export interface SlotStore {
  /**
   * Records the place `holder` of `caller` on this node when the caller holds fewer than `limit` places of
   * `kind` on nodes with a live lease; answers whether it was recorded. Two nodes asking at once for the last
   * place of one caller: exactly one gets it.
   */
  acquire(kind: SlotKind, caller: string, holder: string, limit: number): Promise<boolean>;
  /** Gives the place back (nothing when it is not there). */
  release(holder: string): Promise<void>;
  /** The places this node holds now, counted (a start clears what the process before left). */
  clearNode(): Promise<number>;
  close(): Promise<void>;
}
