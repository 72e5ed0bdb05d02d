// The contracts between the model gateway and egress proxy (src/gateway/), the per-run credentials
// (core/gateway/run-grants.ts), the budgets (core/gateway/budgets.ts) and the usage records
// (store/usage/): each side is built and tested against these types. The usage records and their words
// (budget limits, egress decisions, token counts) live in the store, below core, and are re-exported here.
import type { EgressPolicy } from '../../egress-policy.js';
import type { BudgetLimit, EgressDecisionRecord, ModelRequestRecord } from '../../store/usage/usage-store.js';

export {
  BUDGET_LIMITS,
  EGRESS_DECISIONS,
  type BudgetLimit,
  type EgressDecision,
  type EgressDecisionRecord,
  type ModelRequestRecord,
  type TokenCounts,
} from '../../store/usage/usage-store.js';

/**
 * What a container with a grant does: an engine's run or agent, a workspace's git clone, or a compose stack's
 * services (one grant for all of them). Only runs and agents may use the model; the others only the proxy.
 */
export type GrantKind = 'run' | 'agent' | 'workspace-clone' | 'stack';

/** The kinds whose requests the model gateway forwards. */
export const MODEL_GRANT_KINDS: readonly GrantKind[] = ['run', 'agent'];

/** Who may connect to the gateway: a compose stack's subnet is admitted while its network exists. */
export interface GatewayClients {
  admit(subnet: string): void;
  forget(subnet: string): void;
}

/** Whose a grant is and what it may do; known once a caller's run has the container (a pooled engine's: at its claim). */
export interface GrantHolder {
  readonly kind: GrantKind;
  /** The run's id (`run-…`), an agent's run id, or the clone container's id: the key of every usage record. */
  readonly runId: string;
  /** The caller's identity (`sub`), as everywhere else in Berth. */
  readonly caller: string;
  readonly sessionId?: string;
  /** Set for an agent: its id (`agent-…`). */
  readonly agentId?: string;
  readonly policy: EgressPolicy;
  /** The run's max_budget_usd: model requests stop once its recorded cost reaches it. */
  readonly budgetUsd?: number;
}

/**
 * A per-run credential. `issued`: made with its container (a pooled engine's before any caller claims it):
 * every request with it is refused until it is bound. `bound`: its holder's requests are forwarded and
 * counted. A revoked grant no longer exists: lookups of its token find nothing.
 */
export type Grant =
  | { readonly state: 'issued'; readonly runId: string; readonly issuedAt: number }
  | { readonly state: 'bound'; readonly runId: string; readonly issuedAt: number; readonly holder: GrantHolder };

/** The gateway's view of the grants: a token's grant, checked in constant time. */
export interface GrantLookup {
  lookup(token: string): Grant | undefined;
}

export type BudgetDecision =
  | { readonly ok: true }
  | { readonly ok: false; readonly limit: BudgetLimit; /** Names the limit, its value and what was used: shown to the engine and the caller. */ readonly message: string };

export interface BudgetCheck {
  /** Answers from memory when the totals it needs are there; reads them from the usage store otherwise. */
  check(holder: GrantHolder, now: number): Promise<BudgetDecision>;
}

/** Where the gateway writes what it saw: called once a request is answered, never awaited on its path. */
export interface UsageRecorder {
  recordRequest(record: ModelRequestRecord): Promise<void>;
  recordEgress(record: EgressDecisionRecord): Promise<void>;
}

/** Where the gateway forwards model requests, and the credential it adds (never seen by a container). */
export interface UpstreamModel {
  readonly baseUrl: string;
  readonly credential: { readonly kind: 'api_key' | 'oauth_token'; readonly value: string };
}
