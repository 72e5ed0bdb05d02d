// Persistent agents: spawn, list, read, send a turn, stop, and follow their events. events() is an async
// iterator over GET /agents/{id}/stream that reconnects, with back-off, when the stream drops, until the
// agent exits, the stream is closed by Berth, or the caller aborts. It reconnects with Last-Event-ID (the
// id of the last event it yielded), so Berth sends the events sent while it was disconnected first: none
// is missed or yielded twice, also across a restart of Berth, as long as Berth still keeps them (an
// `events_lost` event says when it does not).

import { answer, type Api } from './api.js';
import { backoffDelay, delay, type BackoffOptions } from './delay.js';
import { BerthError, BerthNetworkError } from './errors.js';
import { readSse } from './sse.js';
import type { Agent, AgentEvent, AgentEventType, AgentList, CallOptions, SentTurn, SpawnRequest } from './types.js';

/** Waits before reconnecting a dropped event stream: 0.25 s, 0.5 s, … at most 5 s; reset by any event. */
export const RECONNECT_BACKOFF: BackoffOptions = { initial: 250, max: 5000, jitter: 0.2 };

/** Events after which an agent's stream has nothing more to say. */
const FINAL_EVENTS: ReadonlySet<AgentEventType> = new Set<AgentEventType>(['exited', 'closed']);

export interface AgentEventsOptions extends CallOptions {
  /** Reconnect when the stream drops (default true). */
  reconnect?: boolean;
  /** Called each time the stream is open (first connection and every reconnection): events flow from here on. */
  onConnect?: () => void;
  /** Called before each reconnection attempt, with why the stream was lost. */
  onReconnect?: (attempt: number, reason: unknown) => void;
  /**
   * Resume after this event id (one a previous iteration yielded, kept by the caller): the first connection
   * already asks for what followed it. `0`: every event Berth keeps. Default: live events from now on.
   */
  lastEventId?: number;
}

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
  async *events(id: string, options: AgentEventsOptions = {}): AsyncGenerator<AgentEvent, void, undefined> {
    const { signal, reconnect = true, onConnect, onReconnect } = options;
    let lastEventId = options.lastEventId;
    let failures = 0;
    for (;;) {
      let lost: unknown;
      try {
        const headers = lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) };
        const body = answer(await this.api.GET('/agents/{id}/stream', { params: { path: { id } }, headers, parseAs: 'stream', signal }));
        onConnect?.();
        for await (const message of readSse(body)) {
          const type = (message.event ?? 'message') as AgentEventType;
          const data = message.data === '' ? {} : (JSON.parse(message.data) as Omit<AgentEvent, 'type'>);
          failures = 0;
          // Berth's ids are whole numbers; anything else (a proxy's own stream) is not resumed from.
          const eventId = message.id !== undefined && /^\d+$/.test(message.id) ? Number(message.id) : undefined;
          if (eventId !== undefined) lastEventId = eventId;
          yield { ...data, type, ...(eventId !== undefined ? { id: eventId } : {}) };
          if (FINAL_EVENTS.has(type)) return;
        }
        lost = new BerthNetworkError(`the event stream of agent ${id} ended without closed or exited`);
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        // Berth refused the stream (unknown agent, no access): reconnecting cannot help.
        if (error instanceof BerthError) throw error;
        lost = error instanceof BerthNetworkError ? error : new BerthNetworkError(`the event stream of agent ${id} broke off: ${(error as Error).message}`, { cause: error });
      }
      if (!reconnect) throw lost;
      failures += 1;
      onReconnect?.(failures, lost);
      await delay(backoffDelay(failures - 1, RECONNECT_BACKOFF), signal);
    }
  }
}
