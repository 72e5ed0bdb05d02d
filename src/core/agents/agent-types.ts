// The persistent agent's public shapes: its statuses, the snapshot the API answers with, and the events
// its subscribers receive (docs/agents.md).

export const AGENT_STATUSES = ['starting', 'idle', 'generating', 'exited'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

export interface AgentSnapshot {
  readonly id: string;
  readonly session_id: string;
  readonly status: AgentStatus;
  readonly created_at: string;
  readonly last_activity_at: string;
  readonly idle_timeout_seconds: number;
  readonly turns_completed: number;
  /** Present (true) only when the idle watchdog is disabled. */
  readonly idle_timeout_disabled?: true;
  /** Set once the agent has exited: why it stopped. */
  readonly exit_error?: string;
}

export const AGENT_EVENT_TYPES = ['turn_start', 'output', 'turn_end', 'error', 'exited', 'closed'] as const;
export type AgentEventType = (typeof AGENT_EVENT_TYPES)[number];

/** One event as sent on the stream: `event: <type>` and `data: <this as JSON>` (closed: `data: {}`). */
export interface AgentEvent {
  readonly type: AgentEventType;
  /**
   * Its id in the event log (store/events), sent as the SSE `id:` line, not in the data; absent for events
   * that are not kept (closed, and the notice of a detach).
   */
  readonly id?: number;
  /** The turn the event belongs to; absent for events outside any turn. */
  readonly turn_id?: string;
  /** output: the engine's stdout line verbatim; error and exited: the error text. */
  readonly content?: string;
  readonly at: string;
}

/** exit_error texts Berth chooses itself; an engine exit carries its code and last stderr line instead. */
export const EXIT_REASONS = {
  idleTimeout: 'agent: idle timeout reached',
  deleted: 'agent: stopped by DELETE /agents/:id',
  shutdown: 'agent: stopped because the service is shutting down',
  startTimeout: 'agent: the engine did not become ready in time',
  sendTimeout: (timeout: string) =>
    `agent: the engine did not read its turn within ${timeout} (SERVICE_AGENT_SEND_TIMEOUT): it is stopped or stuck (e.g. by code in its container); the agent was stopped`,
} as const;
