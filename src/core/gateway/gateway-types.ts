// The contracts between the model gateway and egress proxy (src/gateway/), the per-run credentials
// (core/gateway/run-grants.ts), the budgets (core/gateway/budgets.ts) and the usage records
// (store/usage/). Types only: each side is built and tested against these.
import type { EgressPolicy } from '../../egress-policy.js';

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

/** Which limit stopped a model request. */
export type BudgetLimit = 'run' | 'caller_usd_per_day' | 'caller_tokens_per_day';

export type BudgetDecision =
  | { readonly ok: true }
  | { readonly ok: false; readonly limit: BudgetLimit; /** Names the limit, its value and what was used: shown to the engine and the caller. */ readonly message: string };

export interface BudgetCheck {
  check(holder: GrantHolder, now: number): BudgetDecision;
}

/** Token counts as the Messages API reports them. */
export interface ModelTokens {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_creation_input_tokens: number;
  readonly cache_read_input_tokens: number;
}

/** One model request the gateway forwarded (or refused: `refusal` set, no tokens). */
export interface ModelRequestRecord {
  readonly at: number;
  readonly caller: string;
  readonly runId: string;
  readonly sessionId?: string;
  /** The holder's agentId (an agent's requests): GET /usage lists it with the run. */
  readonly agentId?: string;
  readonly model: string;
  readonly tokens: ModelTokens;
  /** From engine/pricing.ts's table. */
  readonly costUsd: number;
  /** The HTTP status the engine got (the upstream's, or the gateway's refusal). */
  readonly status: number;
  readonly refusal?: { readonly limit: BudgetLimit; readonly message: string };
  /** Time the gateway added before the first byte of the answer reached the engine (ms). */
  readonly overheadMs?: number;
}

/** Every decision of the egress proxy, as counted in berth_egress_requests_total{decision}. */
export type EgressDecision =
  | 'allowed'
  | 'refused_credential'
  | 'refused_mode'
  | 'refused_host'
  | 'refused_address'
  | 'refused_sni'
  | 'refused_protocol'
  | 'failed';

export interface EgressDecisionRecord {
  readonly at: number;
  readonly caller: string;
  readonly runId: string;
  readonly sessionId?: string;
  /** The holder's agentId, as in ModelRequestRecord. */
  readonly agentId?: string;
  /** CONNECT (HTTPS tunnels) or HTTP (plain requests through the proxy). */
  readonly method: 'CONNECT' | 'HTTP';
  readonly host: string;
  readonly port: number;
  readonly decision: EgressDecision;
  /** Why, for a refusal or a failure (the text the client got). */
  readonly reason?: string;
}

/** Where the gateway writes what it saw. */
export interface UsageRecorder {
  recordRequest(record: ModelRequestRecord): void;
  recordEgress(record: EgressDecisionRecord): void;
}

/** Where the gateway forwards model requests, and the credential it adds (never seen by a container). */
export interface UpstreamModel {
  readonly baseUrl: string;
  readonly credential: { readonly kind: 'api_key' | 'oauth_token'; readonly value: string };
}
