// The per-run credentials of the model gateway and egress proxy (docs/egress.md). Every engine container
// (and workspace clone) gets a random token of its own instead of the model key: issued with its container,
// bound to its caller's run once that run has the container (a pooled engine's at its claim), and revoked
// as soon as the run's outcome is known. The gateway asks lookup() on every request: a token whose grant is
// revoked, or only issued, gets nothing. Kept in memory, by the token's SHA-256 (the map lookup compares
// digests, so no comparison of the token's own bytes can leak it through timing), and written through to
// the store, so that the grants of runs that outlive a restart (async jobs, agents) keep working after it.
// The writes never hold up a run or a request: issue, bind and revoke change the memory at once (what the
// gateway reads) and queue the store's write behind the earlier ones of the same run, so the store ends in the
// memory's state whatever order the database answers in. A write that fails is logged: this process goes on
// with its memory, and at the next start the store's stale row is revoked (retainOnly) or the run's requests
// are refused (a grant missing). flush() waits for the queued writes (before the store is closed).
import { createHash, randomBytes } from 'node:crypto';
import { parseHostPattern, type EgressPolicy, type HostPattern } from '../../egress-policy.js';
import type { GrantRow, GrantStore } from '../../store/gateway/grant-store.js';
import { OrderedWrites } from '../../store/ordered-writes.js';
import type { Grant, GrantHolder, GrantKind, GrantLookup } from './gateway-types.js';

/** A model request of a run the budgets refused: why (the limit named), and when. */
export interface BudgetRefusal {
  readonly message: string;
  readonly at: number;
}

/** How long a run's refusal stays readable after its grant is revoked: its answer is made after that. */
export const REFUSAL_RETENTION_MS = 10 * 60_000;

/**
 * A grant younger than this is never swept: its container may be being created right now, after the
 * list of containers the sweep compares with was taken.
 */
export const SWEEP_GRACE_MS = 5 * 60_000;

const TOKEN = /^brt_[0-9a-f]{64}$/;
const GRANT_KINDS: readonly GrantKind[] = ['run', 'agent', 'workspace-clone', 'stack'];

export interface RunGrantsOptions {
  readonly now?: () => number;
  /** A grant read back from the store that cannot be used any more (its holder unreadable), a store failing at a revoke. */
  readonly log?: (details: Record<string, unknown>, message: string) => void;
}

export class RunGrants implements GrantLookup {
  private readonly byDigest = new Map<string, Grant>();
  private readonly digestOfRun = new Map<string, string>();
  private readonly refusals = new Map<string, { refusal: BudgetRefusal; expiresAt: number | undefined }>();
  private readonly now: () => number;
  private readonly log: NonNullable<RunGrantsOptions['log']>;
  /** Set by detach(): revocations stay in memory, the store keeps every grant for the next start. */
  private detached = false;
  /** The store's writes, queued in order per run. */
  private readonly writes: OrderedWrites;

  /** Grants written through to `store`, starting from `kept` (the rows it holds; see RunGrants.open). */
  constructor(
    private readonly store: GrantStore,
    options: RunGrantsOptions = {},
    kept: readonly GrantRow[] = [],
  ) {
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => undefined);
    this.writes = new OrderedWrites((runId, what, error) => this.log({ err: error, runId }, `${what} failed: the store may be behind this process's grants`));
    for (const row of kept) {
      const grant = grantOfRow(row);
      if (typeof grant === 'string') {
        this.log({ runId: row.runId, reason: grant }, 'a kept grant cannot be used any more; it is revoked');
        this.write(row.runId, 'removing an unusable grant', () => store.remove(row.runId));
        continue;
      }
      this.byDigest.set(row.tokenSha256, grant);
      this.digestOfRun.set(row.runId, row.tokenSha256);
    }
  }

  /** The grants `store` kept (a previous process's), read once at start, written through from then on. */
  static async open(store: GrantStore, options: RunGrantsOptions = {}): Promise<RunGrants> {
    return new RunGrants(store, options, await store.all());
  }

  /** A new token for the container of `runId`, refused until bound; one issued before for it is revoked. */
  issue(runId: string): string {
    this.forget(runId);
    const token = `brt_${randomBytes(32).toString('hex')}`;
    const digest = digestOf(token);
    const issuedAt = this.now();
    this.write(runId, 'storing an issued grant', () => this.store.put({ tokenSha256: digest, runId, issuedAt, holder: null }));
    this.byDigest.set(digest, { state: 'issued', runId, issuedAt });
    this.digestOfRun.set(runId, digest);
    return token;
  }

  /**
   * From now on the token's requests are the holder's (forwarded, counted, checked against its budgets and
   * egress policy). Binding again replaces the holder (an agent learns its id after its engine's claim).
   */
  bind(runId: string, holder: GrantHolder): void {
    const digest = this.digestOfRun.get(runId);
    const grant = digest === undefined ? undefined : this.byDigest.get(digest);
    if (digest === undefined || !grant) throw new Error(`run ${runId} has no credential to bind (revoked or never issued)`);
    if (holder.runId !== runId) throw new Error(`a grant of run ${runId} cannot be bound to run ${holder.runId}`);
    const stored = JSON.stringify(storedHolder(holder));
    this.write(runId, 'storing a grant\'s holder', () => this.store.setHolder(runId, stored));
    this.byDigest.set(digest, { state: 'bound', runId, issuedAt: grant.issuedAt, holder });
  }

  /** The token is refused from now on. A refusal noted for the run stays readable a while (refusalOf). */
  revoke(runId: string): void {
    this.forget(runId);
    const noted = this.refusals.get(runId);
    if (noted && noted.expiresAt === undefined) noted.expiresAt = this.now() + REFUSAL_RETENTION_MS;
  }

  lookup(token: string): Grant | undefined {
    if (!TOKEN.test(token)) return undefined;
    return this.byDigest.get(digestOf(token));
  }

  /** Whether the run's container holds a live grant (bound or not). */
  has(runId: string): boolean {
    return this.digestOfRun.has(runId);
  }

  /** The gateway refused one of the run's model requests for its budget (GatewayOptions.onBudgetRefusal). */
  noteRefusal(runId: string, message: string): void {
    this.prune();
    this.refusals.set(runId, { refusal: { message, at: this.now() }, expiresAt: this.has(runId) ? undefined : this.now() + REFUSAL_RETENTION_MS });
  }

  /** The run's last budget refusal, if it had one: its run then ends with errors.budgetExceeded. */
  refusalOf(runId: string): BudgetRefusal | undefined {
    this.prune();
    return this.refusals.get(runId)?.refusal;
  }

  /** At start: every grant whose run is not live (a job still running, an agent) is revoked. Returns how many. */
  retainOnly(liveRunIds: Iterable<string>): number {
    const live = new Set(liveRunIds);
    return this.revokeWhere((runId) => !live.has(runId));
  }

  /**
   * Periodically: grants whose container is gone (a path that ended without revoking, a container removed
   * behind Berth's back) are revoked; those issued within SWEEP_GRACE_MS are left alone. Returns how many.
   */
  sweep(existingRunIds: Iterable<string>): number {
    const existing = new Set(existingRunIds);
    const cutoff = this.now() - SWEEP_GRACE_MS;
    return this.revokeWhere((runId, grant) => !existing.has(runId) && grant.issuedAt < cutoff);
  }

  /**
   * A stop that leaves jobs and agents running for the next start (SERVICE_SHUTDOWN_MODE=detach): their
   * grants stay in the store as they are, whatever this process's ends of its waits on them revoke from
   * here (a wait cut by the stop is no end of the run). The next start keeps those of live runs only.
   */
  detach(): void {
    this.detached = true;
  }

  /** The run ids of every live grant (tests, diagnostics). */
  runIds(): string[] {
    return [...this.digestOfRun.keys()];
  }

  /**
   * Settles once every store write queued so far has (those queued meanwhile included), or after 10 s of a
   * store that does not answer (logged: the next start finds the store as it was). Never rejects.
   */
  async flush(): Promise<void> {
    if (!(await this.writes.flush())) this.log({}, 'the grant store did not take every write in time; the next start revokes what it finds stale');
  }

  /** Queues a store write behind the run's earlier ones; a failure is logged, never thrown at the caller. */
  private write(runId: string, what: string, operation: () => Promise<void>): void {
    this.writes.add(runId, what, operation);
  }

  private revokeWhere(revoked: (runId: string, grant: Grant) => boolean): number {
    let count = 0;
    for (const [runId, digest] of [...this.digestOfRun]) {
      const grant = this.byDigest.get(digest);
      if (grant && revoked(runId, grant)) {
        this.revoke(runId);
        count += 1;
      }
    }
    return count;
  }

  private forget(runId: string): void {
    const digest = this.digestOfRun.get(runId);
    if (digest === undefined) return;
    this.byDigest.delete(digest);
    this.digestOfRun.delete(runId);
    // Refused from here whatever the store says; a row it failed to drop is revoked at the next start
    // (retainOnly), and a revoke must not fail the run's or agent's cleanup.
    if (this.detached) return;
    this.write(runId, 'removing a revoked grant', () => this.store.remove(runId));
  }

  private prune(): void {
    const now = this.now();
    for (const [runId, noted] of this.refusals) {
      if (noted.expiresAt !== undefined && noted.expiresAt <= now) this.refusals.delete(runId);
    }
  }
}

function digestOf(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** A holder as kept in the store: host patterns as written (parsed again when read back). */
interface StoredHolder {
  readonly kind: GrantKind;
  readonly runId: string;
  readonly caller: string;
  readonly sessionId?: string;
  readonly agentId?: string;
  readonly policy: { readonly mode: EgressPolicy['mode']; readonly allow?: readonly string[] };
  readonly budgetUsd?: number;
}

function storedHolder(holder: GrantHolder): StoredHolder {
  const { policy } = holder;
  return {
    ...holder,
    policy: policy.mode === 'allowlist' ? { mode: 'allowlist', allow: policy.allow.map((pattern) => pattern.text) } : { mode: policy.mode },
  };
}

/** The grant a stored row describes, or why it cannot be used. */
function grantOfRow(row: GrantRow): Grant | string {
  if (row.holder === null) return { state: 'issued', runId: row.runId, issuedAt: row.issuedAt };
  let stored: StoredHolder;
  try {
    stored = JSON.parse(row.holder) as StoredHolder;
  } catch {
    return 'its holder is not JSON';
  }
  if (!GRANT_KINDS.includes(stored.kind) || stored.runId !== row.runId || typeof stored.caller !== 'string') return 'its holder is not one';
  const policy = policyOf(stored.policy);
  if (typeof policy === 'string') return policy;
  const holder: GrantHolder = {
    kind: stored.kind,
    runId: stored.runId,
    caller: stored.caller,
    ...(typeof stored.sessionId === 'string' ? { sessionId: stored.sessionId } : {}),
    ...(typeof stored.agentId === 'string' ? { agentId: stored.agentId } : {}),
    policy,
    ...(typeof stored.budgetUsd === 'number' ? { budgetUsd: stored.budgetUsd } : {}),
  };
  return { state: 'bound', runId: row.runId, issuedAt: row.issuedAt, holder };
}

function policyOf(stored: StoredHolder['policy'] | undefined): EgressPolicy | string {
  switch (stored?.mode) {
    case 'none':
      return { mode: 'none' };
    case 'open':
      return { mode: 'open' };
    case 'allowlist': {
      const allow: HostPattern[] = [];
      for (const text of stored.allow ?? []) {
        const pattern = parseHostPattern(text);
        if (typeof pattern === 'string') return `its egress policy holds ${pattern}`;
        allow.push(pattern);
      }
      return { mode: 'allowlist', allow };
    }
    default:
      return 'its egress policy is not one';
  }
}
