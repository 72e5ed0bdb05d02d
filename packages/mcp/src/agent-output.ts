// What an agent said, for the read_agent_output tool: its events (GET /agents/{id}/stream, replayed from
// Berth's event log after a cursor) read up to the end of the next turn, the agent's exit, or a wait, and
// summed up per turn as text a model can use: the assistant's words and the turn's result.
// The engine's stream-json lines are parsed here only to pick those out; every other line is left aside.
import type { AgentEvent, Berth } from '@berth/client';

export interface AgentTurnOutput {
  readonly turn_id: string;
  /** The assistant's text blocks of the turn, in order. */
  text: string;
  /** The turn's result (the engine's `result` line), once it ended. */
  result?: string;
  is_error?: boolean;
  /** The engine's stderr lines and a failed turn's reason. */
  readonly errors: string[];
}

export interface AgentOutput {
  /** Pass as after_event_id to read on from here. */
  last_event_id: number;
  /** turn_ended: a turn ended (the last one listed); exited: the agent stopped; waiting: the wait elapsed first. */
  state: 'turn_ended' | 'exited' | 'waiting';
  readonly turns: AgentTurnOutput[];
  exit_error?: string;
  /** The engine's stderr lines outside any turn. */
  readonly errors: string[];
  /** Berth no longer keeps some events after the cursor (its event log is bounded). */
  events_lost?: true;
}

export interface ReadAgentOutputOptions {
  /** The id of the last event already read; 0: from the oldest event Berth keeps. */
  readonly after: number;
  readonly waitMs: number;
  readonly signal?: AbortSignal;
}

export async function readAgentOutput(berth: Berth, agentId: string, options: ReadAgentOutputOptions): Promise<AgentOutput> {
  const waited = AbortSignal.timeout(options.waitMs);
  const signal = options.signal ? AbortSignal.any([options.signal, waited]) : waited;
  const output: AgentOutput = { last_event_id: options.after, state: 'waiting', turns: [], errors: [] };
  const turnOf = (event: AgentEvent): AgentTurnOutput | undefined => {
    if (event.turn_id === undefined) return undefined;
    let turn = output.turns.find((t) => t.turn_id === event.turn_id);
    if (!turn) {
      turn = { turn_id: event.turn_id, text: '', errors: [] };
      output.turns.push(turn);
    }
    return turn;
  };
  try {
    for await (const event of berth.agents.events(agentId, { lastEventId: options.after, signal })) {
      if (event.id !== undefined) output.last_event_id = event.id;
      const turn = turnOf(event);
      if (event.type === 'events_lost') output.events_lost = true;
      else if (event.type === 'output' && turn && event.content !== undefined) addOutputLine(turn, event.content);
      else if (event.type === 'error' && event.content !== undefined) (turn?.errors ?? output.errors).push(event.content);
      else if (event.type === 'turn_end') {
        output.state = 'turn_ended';
        return output;
      } else if (event.type === 'exited') {
        output.state = 'exited';
        if (event.content !== undefined) output.exit_error = event.content;
        return output;
      }
    }
    return output;
  } catch (error) {
    // The wait elapsing is an answer (state waiting); the caller's abort or Berth's refusal is not.
    if (waited.aborted && !options.signal?.aborted) return output;
    throw error;
  }
}

/** Picks the assistant's text and the result out of one stream-json line of the engine. */
function addOutputLine(turn: AgentTurnOutput, line: string): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return;
  }
  if (typeof parsed !== 'object' || parsed === null) return;
  const record = parsed as { type?: unknown; result?: unknown; is_error?: unknown; message?: { content?: unknown } };
  if (record.type === 'result') {
    if (typeof record.result === 'string') turn.result = record.result;
    if (typeof record.is_error === 'boolean') turn.is_error = record.is_error;
  } else if (record.type === 'assistant' && Array.isArray(record.message?.content)) {
    for (const block of record.message.content as { type?: unknown; text?: unknown }[]) {
      if (block?.type === 'text' && typeof block.text === 'string') turn.text += block.text;
    }
  }
}
