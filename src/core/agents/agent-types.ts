// The persistent agent's public shapes: its statuses, the spawn request and the snapshot the API answers
// with (as JSON schemas: Fastify checks and serialises with them, the OpenAPI document shows them, and the
// types are their static types), and the events its subscribers receive (docs/agents.md).
import { Type, type Static } from '@sinclair/typebox';
import { AGENT_STATUSES } from '../../store/agents/agent-store.js';
import { EngineOptionsSchema, NetworkSchema } from '../run-request.js';

export { AGENT_STATUSES, type AgentStatus } from '../../store/agents/agent-store.js';

/** What the API answers about an agent (POST, GET, the list). */
export const AgentSnapshotSchema = Type.Object({
  id: Type.String({ description: 'Agent id, prefix agent-' }),
  session_id: Type.String({ format: 'uuid' }),
  status: Type.Union(AGENT_STATUSES.map((status) => Type.Literal(status)), {
    description: 'starting (container booting; send is 503), idle (takes a turn), generating (a turn runs; send is 409), exited (send is 410)',
  }),
  created_at: Type.String({ format: 'date-time' }),
  last_activity_at: Type.String({ format: 'date-time', description: 'Updated on every send and at the end of every turn.' }),
  idle_timeout_seconds: Type.Integer({ description: 'Effective idle timeout.' }),
  turns_completed: Type.Integer({ description: 'Turns that ended with turn_end.' }),
  idle_timeout_disabled: Type.Optional(Type.Literal(true, { description: 'Present only when the idle watchdog is disabled.' })),
  exit_error: Type.Optional(
    Type.String({
      description:
        'Why the agent stopped, set once it has exited: `agent: idle timeout reached`, `agent: stopped by DELETE /agents/:id`, `agent: stopped because the service is shutting down`, `agent: the engine did not become ready in time`, or the engine\'s exit code and last stderr line.',
    }),
  ),
});
export type AgentSnapshot = Static<typeof AgentSnapshotSchema>;

/** The body of POST /agents. */
export const AgentSpawnRequestSchema = Type.Object(
  {
    prompt: Type.Optional(Type.String({ description: 'Optional first turn, sent as soon as the engine is ready.' })),
    workdir: Type.Optional(Type.String({ description: 'Working directory inside the container. Default /workspace.' })),
    workspace: Type.Optional(
      Type.String({ description: 'A workspace of the caller (UUID) mounted read-write at the workdir; the agent holds it until it exits. Without one, a new session gets a workspace of its own.' }),
    ),
    idle_timeout_seconds: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 31_536_000, description: 'Idle timeout in seconds; 0 keeps the default (SERVICE_AGENT_IDLE_TIMEOUT, 1800).' }),
    ),
    disable_idle_timeout: Type.Optional(Type.Boolean({ description: 'No idle watchdog: the agent lives until DELETE or service shutdown.' })),
    engine: Type.Optional(EngineOptionsSchema),
    container: Type.Optional(
      Type.Object(
        { network: Type.Optional(NetworkSchema) },
        { additionalProperties: false, description: 'Of the container options only `network` applies to an agent (its egress policy, as on POST /run); the others are the server\'s defaults.' },
      ),
    ),
  },
  { additionalProperties: false },
);
export type AgentSpawnRequest = Static<typeof AgentSpawnRequestSchema>;

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
