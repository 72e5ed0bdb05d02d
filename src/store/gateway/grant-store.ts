// Where the per-run credentials of the model gateway are kept (core/gateway/run-grants.ts holds them in
// memory and writes through this): only a token's SHA-256, never the token itself, so the file does not
// give anyone a usable credential. The holder is opaque JSON here; core/ gives it its meaning.

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

export interface GrantStore {
  /** Every grant kept, oldest first (read once at start). */
  all(): GrantRow[];
  /** Adds a grant; one already kept for the same run is replaced. */
  put(row: GrantRow): void;
  setHolder(runId: string, holder: string | null): void;
  remove(runId: string): void;
  close(): void;
}
