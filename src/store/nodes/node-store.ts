// The registry of the nodes sharing one database (issue 26): each node holds its name by a lease that it
// renews. Times are the database's clock (now()), never a node's: nodes whose clocks differ still agree on
// who holds a lease and when it lapses.

/** One node's row. */
export interface NodeRecord {
  readonly name: string;
  /** How the other nodes reach its API (SERVICE_NODE_URL). */
  readonly url: string;
  /** Berth's version on that node. */
  readonly version: string;
  /** When the holding process registered (ISO 8601). */
  readonly startedAt: string;
  /** Its last heartbeat (ISO 8601). */
  readonly heartbeatAt: string;
  /** When its lease lapses without another heartbeat (ISO 8601). */
  readonly expiresAt: string;
  /** When it stopped and released its lease (ISO 8601); null while it runs, or once it is lost. */
  readonly releasedAt: string | null;
}

export interface NodeIdentity {
  readonly name: string;
  /**
   * The id kept in the node's data directory: a process starting on the same directory (a restart, after a
   * crash too) takes the name back even while the lease of the process before is live.
   */
  readonly dataId: string;
  readonly url: string;
  readonly version: string;
}

/** What claiming a name answered. */
export type NodeClaim =
  | { readonly claimed: true; readonly node: NodeRecord }
  /** Another process holds the name and its lease is live: `holder` is its row. */
  | { readonly claimed: false; readonly holder: NodeRecord };

export interface NodeStore {
  /**
   * Takes `identity.name` for the process `holder` with a lease of `leaseMs`: a name never seen, released,
   * whose lease has lapsed, or last held on the same data directory (`dataId`) is taken; a live one of
   * another data directory is not.
   */
  claim(identity: NodeIdentity, holder: string, leaseMs: number): Promise<NodeClaim>;
  /** Renews the lease of `name` held by `holder`; null when that process no longer holds it (taken over, or its loss is being handled). */
  heartbeat(name: string, holder: string, leaseMs: number): Promise<NodeRecord | null>;
  /** Releases the lease of `name` held by `holder` (the row stays, released); false when it did not hold it. */
  release(name: string, holder: string): Promise<boolean>;
  /** Nodes whose lease lapsed without a release and whose loss nobody has handled yet: lost, their work to take over. */
  expired(): Promise<NodeRecord[]>;
  /**
   * `handler` takes the handling of lost node `name` for `forMs` (one node at a time; another may take it
   * over once that time is over, if it was not handled); false when the node is not lost (a heartbeat
   * landed), already handled, or another node handles it. Once taken, `name`'s heartbeats fail.
   */
  takeLoss(name: string, handler: string, forMs: number): Promise<boolean>;
  /** Records that `handler` took over the lost node's work; false when it no longer held the handling. */
  lossHandled(name: string, handler: string): Promise<boolean>;
  /** Every node ever registered, by name. */
  list(): Promise<NodeRecord[]>;
  close(): Promise<void>;
}
