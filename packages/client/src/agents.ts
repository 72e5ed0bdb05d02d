// Persistent agents: spawn, list, read, send a turn, stop, and follow their events. events() is an async
// iterator over GET /agents/{id}/stream that reconnects with Last-Event-ID when the stream drops
// (followed-events.ts), until the agent exits, the stream is closed by Berth, or the caller aborts.

import { answer, type Api } from './api.js';
import { followEvents, type FollowOptions } from './followed-events.js';
import type { Agent, AgentEvent, AgentEventType, AgentList, CallOptions, SentTurn, SpawnRequest } from './types.js';

/** Events after which an agent's stream has nothing more to say. */
const FINAL_EVENTS: ReadonlySet<AgentEventType> = new Set<AgentEventType>(['closed', 'exited']);

/** How agents.events (and jobs.events) follow a stream: reconnection and where to resume. */
export interface AgentEventsOptions extends FollowOptions {}

export class Agents {
  constructor(private readonly api: Api) {}

  /** Starts an agent; it answers at once with status `starting` and becomes `idle` when ready. */
  async spawn(request: SpawnRequest = {}, options: CallOptions = {}): Promise<Agent> {
    return answer(await this.api.POST('/agents', { body: request, signal: options.signal }));
  }

  async list(options: CallOptions = {}): Promise<AgentList> {
    return answer(await this.api.GET('/agents', { signal: options.signal }));
  }

  async get(id: string, options: CallOptions = {}): Promise<Agent> {
    return answer(await this.api.GET('/agents/{id}', { params: { path: { id } }, signal: options.signal }));
  }

  /**
   * Sends a turn. It answers at once; the turn's output arrives on events(). While the agent is still
   * starting, Berth answers 503 and the SDK tries again (see the retry rules).
   */
  async send(id: string, prompt: string, options: CallOptions = {}): Promise<SentTurn> {
    return answer(await this.api.POST('/agents/{id}/send', { params: { path: { id } }, body: { prompt }, signal: options.signal }));
  }

  /** Stops the agent and removes its container. */
  async delete(id: string, options: CallOptions = {}): Promise<void> {
    await this.api.DELETE('/agents/{id}', { params: { path: { id } }, signal: options.signal });
  }

  /** The agent's events as they happen, until it exits or the stream is closed (see the file's comment). */
  events(id: string, options: AgentEventsOptions = {}): AsyncGenerator<AgentEvent, void, undefined> {
    return followEvents<AgentEvent>(
      {
        name: `agent ${id}`,
        open: async (headers, signal) => answer(await this.api.GET('/agents/{id}/stream', { params: { path: { id } }, headers, parseAs: 'stream', signal })),
        untypedAs: 'message',
        final: FINAL_EVENTS,
        yieldsFinal: true,
      },
      options,
    );
  }
}
