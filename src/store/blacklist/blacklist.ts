// The token blacklist: JWT ids (`jti`) of logged-out tokens, each kept until the token would have
// expired anyway. Backends: memory, the durable `bolt` SQLite file, and PostgreSQL for several nodes; all
// pass test/support/blacklist-contract.ts. Callers treat any rejected promise as "unknown" and fail closed.
export interface TokenBlacklist {
  /** Blacklists `jti` until `expiresAtMs` (epoch milliseconds); adding twice keeps the later expiry. */
  add(jti: string, expiresAtMs: number): Promise<void>;
  has(jti: string): Promise<boolean>;
  /** Forgets entries whose expiry is at or before `nowMs`; returns how many were removed. */
  removeExpired(nowMs: number): Promise<number>;
  close(): Promise<void>;
}
