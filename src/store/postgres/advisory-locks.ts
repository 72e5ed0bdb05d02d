// PostgreSQL advisory locks Berth takes, in one list so that two uses can never share a key by accident. A lock
// is named by two integers: Berth's namespace (so another application on the same database does not collide)
// and the use.
export const BERTH_LOCK_NAMESPACE = 0x62657274; // 'bert'

export const ADVISORY_LOCKS = {
  /** Held by a node while it applies migrations: nodes starting together apply each migration once. */
  migrations: 1,
  /** Held for a transaction that prunes the event log: nodes pruning at once never deadlock on its rows. */
  eventPrune: 2,
} as const;

export type AdvisoryLock = keyof typeof ADVISORY_LOCKS;

/**
 * The namespace of the per-caller locks of cluster-wide places (store/slots/postgres-slot-store.ts): their second
 * integer is a hash of the caller, so they have a namespace of their own and never meet the locks above.
 */
export const SLOT_LOCK_NAMESPACE = 0x62736c74; // 'bslt'

/** The SQL arguments of pg_advisory_lock(int, int) and its kin for `lock`. */
export function advisoryLockKey(lock: AdvisoryLock): [number, number] {
  return [BERTH_LOCK_NAMESPACE, ADVISORY_LOCKS[lock]];
}
