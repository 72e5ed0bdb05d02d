// This node's place among the nodes sharing one database (issue 26): at start it registers under its name and
// holds a lease (expires_at = now + lease, on the database's clock), renewed by a heartbeat every third of
// the lease, and released at stop. A name whose live lease is held from another data directory is refused: two
// nodes under one name would each take the other's grants, agents and jobs for their own. A restart on the
// same data directory (after a crash, within the lease) takes the name back at once, and the process before,
// should it still run, finds its lease gone at its next heartbeat. expiredNodes() lists the nodes
// whose lease lapsed without a release (lost), for whoever takes their work over.
import { randomUUID } from 'node:crypto';
import type { NodeIdentity, NodeRecord, NodeStore } from '../../store/nodes/node-store.js';

export class NodeNameTakenError extends Error {
  constructor(readonly holder: NodeRecord) {
    super(
      `node name "${holder.name}" is held by another live node, on another data directory (${holder.url}, started ${holder.startedAt}, lease until ${holder.expiresAt}): ` +
        'set a different SERVICE_NODE_NAME, or stop that node (a node that crashed frees its name when its lease lapses)',
    );
    this.name = 'NodeNameTakenError';
  }
}

export interface NodeRegistryOptions {
  readonly leaseMs: number;
  /** A heartbeat failed, or found the lease taken over (the node is then no longer registered). */
  readonly onHeartbeatError: (error: Error) => void;
  readonly now?: () => number;
}

type LeaseState =
  | { readonly kind: 'registered'; readonly expiresAtMs: number }
  | { readonly kind: 'lost' }
  | { readonly kind: 'released' };

export class NodeRegistry {
  private state: LeaseState;
  private readonly timer: NodeJS.Timeout;
  /** The heartbeat under way, if any: heartbeats never overlap, and deregister() waits for the last. */
  private beating: Promise<void> = Promise.resolve();
  private readonly now: () => number;
  private readonly lostListeners: (() => void)[] = [];

  private constructor(
    private readonly store: NodeStore,
    readonly identity: NodeIdentity,
    private readonly options: NodeRegistryOptions,
    /** This process's claim on the name: another process (a restart too) holds it with another id. */
    private readonly holder: string,
    registered: NodeRecord,
  ) {
    this.now = options.now ?? Date.now;
    this.state = { kind: 'registered', expiresAtMs: this.localExpiry(registered) };
    this.timer = setInterval(() => {
      this.beating = this.beating.then(() => this.heartbeat());
    }, Math.max(1, Math.floor(options.leaseMs / 3)));
    this.timer.unref();
  }

  /** Registers `identity` and starts the heartbeats; refused (NodeNameTakenError) while another process holds the name. */
  static async register(store: NodeStore, identity: NodeIdentity, options: NodeRegistryOptions): Promise<NodeRegistry> {
    const holder = randomUUID();
    const claim = await store.claim(identity, holder, options.leaseMs);
    if (!claim.claimed) throw new NodeNameTakenError(claim.holder);
    return new NodeRegistry(store, identity, options, holder, claim.node);
  }

  /** Seconds until this node's lease lapses without another heartbeat; 0 once lost or released. */
  leaseSecondsLeft(): number {
    return this.state.kind === 'registered' ? Math.max(0, (this.state.expiresAtMs - this.now()) / 1000) : 0;
  }

  /** Whether this node still holds its name. */
  get registered(): boolean {
    return this.state.kind === 'registered';
  }

  /** Nodes whose lease lapsed without a release, their loss not handled yet: lost. */
  expiredNodes(): Promise<NodeRecord[]> {
    return this.store.expired();
  }

  /** Takes the handling of lost node `name` for this node, for `forMs` (node-loss.ts); false: not ours to handle. */
  takeLoss(name: string, forMs: number): Promise<boolean> {
    if (this.state.kind !== 'registered') return Promise.resolve(false);
    return this.store.takeLoss(name, this.identity.name, forMs);
  }

  /** Records that this node took over lost node `name`'s work. */
  lossHandled(name: string): Promise<boolean> {
    return this.store.lossHandled(name, this.identity.name);
  }

  /** Called once if this node loses its lease while running (taken over, or its loss handled by another node). */
  whenLost(listener: () => void): void {
    if (this.state.kind === 'lost') listener();
    else this.lostListeners.push(listener);
  }

  /** Every node registered on the database, this one included. */
  nodes(): Promise<NodeRecord[]> {
    return this.store.list();
  }

  /** Stops the heartbeats and releases the lease (the name is free at once). Safe to call twice. */
  async deregister(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    if (this.state.kind !== 'registered') return;
    this.state = { kind: 'released' };
    await this.store.release(this.identity.name, this.holder);
  }

  private async heartbeat(): Promise<void> {
    if (this.state.kind !== 'registered') return;
    try {
      const renewed = await this.store.heartbeat(this.identity.name, this.holder, this.options.leaseMs);
      if (this.state.kind !== 'registered') return;
      if (renewed === null) {
        // Taken over after our lease lapsed (a pause longer than the lease): the name is another process's now.
        this.state = { kind: 'lost' };
        clearInterval(this.timer);
        this.options.onHeartbeatError(new Error(`node "${this.identity.name}" lost its lease: another process holds the name now, or another node took over its work`));
        for (const listener of this.lostListeners.splice(0)) listener();
        return;
      }
      this.state = { kind: 'registered', expiresAtMs: this.localExpiry(renewed) };
    } catch (error) {
      // The lease runs on; the next heartbeat retries.
      this.options.onHeartbeatError(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /**
   * The lease's end on this process's clock: the database's lease length counted from its heartbeat, shifted
   * by the difference of the clocks (the lease's length is what matters, not either clock).
   */
  private localExpiry(record: NodeRecord): number {
    return this.now() + (Date.parse(record.expiresAt) - Date.parse(record.heartbeatAt));
  }
}
