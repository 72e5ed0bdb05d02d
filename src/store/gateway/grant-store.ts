// Where the per-run credentials of the model gateway are kept (core/gateway/run-grants.ts holds them in
// memory and writes through this): only a token's SHA-256, never the token itself, so the file does not
// give anyone a usable credential. The holder is opaque JSON here; core/ gives it its meaning.
//
// The grants are a node's own: its gateway admits only its own containers. On a shared PostgreSQL every node
// keeps its rows apart (the `node` the store is opened for), so one node's start, which revokes every grant
// whose run it does not follow any more, never touches another node's.

export interface GrantRow {
  /** Hex SHA-256 of the token. */
  readonly tokenSha256: string;
  /** The container's id (its berth.run label): one grant per run, agent or clone container. */
  readonly runId: string;
  /** Milliseconds since the epoch. */
  readonly issuedAt: number;
  /** The bound holder as JSON; null while the grant is only issued (a pooled engine's before its claim). */
  readonly holder: string | null;
}

/**
 * Every call answers a promise (the SQLite file at once, PostgreSQL after a round trip). RunGrants never waits
 * for one on a request's path: it answers lookups from memory and writes through in the background, in order
 * per run.
 */
export interface GrantStore {
  /** Every grant kept, oldest first (read once at start). */
  all(): Promise<GrantRow[]>;
  /** Adds a grant; one already kept for the same run is replaced. */
  put(row: GrantRow): Promise<void>;
  setHolder(runId: string, holder: string | null): Promise<void>;
  remove(runId: string): Promise<void>;
  close(): Promise<void>;
}
