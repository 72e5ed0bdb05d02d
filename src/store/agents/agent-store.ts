// Durable records of persistent agents (core/agents): what a restarted service needs to find each agent's
// container and session again and to show the same snapshot (id, session, owner, options, timestamps,
// turn count, status). One implementation, SQLite (sqlite-agent-store.ts).

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

export interface AgentStore {
  insert(record: AgentRecord): void;
  update(id: string, progress: AgentProgress): void;
  remove(id: string): void;
  /** Agents not exited, oldest first. */
  live(): AgentRecord[];
  /** Exited agents, oldest first. */
  exited(): AgentRecord[];
  /** Exited agents whose exited_at is older than `cutoff` (ISO 8601) are deleted; returns how many. */
  removeExitedBefore(cutoff: string): number;
  close(): void;
}
