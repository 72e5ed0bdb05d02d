// Durable records of persistent agents (core/agents): what a restarted service needs to find each agent's
// container and session again and to show the same snapshot (id, session, owner, options, timestamps,
// turn count, status). Two implementations: SQLite (sqlite-agent-store.ts) and PostgreSQL
// (postgres-agent-store.ts, each node's agents apart: a node follows again only the containers on its own Podman).

/** An agent's statuses, the store's and the API's alike (core/agents/agent-types.ts re-exports them). */
export const AGENT_STATUSES = ['starting', 'idle', 'generating', 'exited'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

export interface AgentRecord {
  readonly id: string;
  readonly owner: string;
  readonly sessionId: string;
  readonly runId: string;
  readonly inputsId: string;
  readonly container: string;
  readonly workdir: string;
  readonly persistent: boolean;
  readonly idleTimeoutSeconds: number;
  readonly idleTimeoutDisabled: boolean;
  readonly status: AgentStatus;
  readonly currentTurn: string | null;
  readonly turnsCompleted: number;
  readonly turnsEnded: number;
  /** Results the engine printed before the agent's first turn (a pooled engine's warm-up): not turns. */
  readonly warmUpResults: number;
  readonly exitError: string | null;
  readonly createdAt: string;
  readonly lastActivityAt: string;
  readonly exitedAt: string | null;
}

/** What changes over an agent's life. */
export type AgentProgress = Pick<AgentRecord, 'status' | 'currentTurn' | 'turnsCompleted' | 'turnsEnded' | 'exitError' | 'lastActivityAt' | 'exitedAt'>;

/**
 * Every call answers a promise (the SQLite file at once, PostgreSQL after a round trip). The agent service
 * never waits for a write on an agent's path: it queues them in order per agent (store/ordered-writes.ts).
 */
export interface AgentStore {
  insert(record: AgentRecord): Promise<void>;
  update(id: string, progress: AgentProgress): Promise<void>;
  remove(id: string): Promise<void>;
  /** Agents not exited, oldest first. */
  live(): Promise<AgentRecord[]>;
  /** Exited agents, oldest first. */
  exited(): Promise<AgentRecord[]>;
  /** Exited agents whose exited_at is older than `cutoff` (ISO 8601) are deleted; returns how many. */
  removeExitedBefore(cutoff: string): Promise<number>;
  close(): Promise<void>;
}
