// The wire format of the offline model's replies: Messages-API server-sent events when the request
// streams (the engine always does), one JSON message when it does not, and the Anthropic error shape.
import type { ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { Reply, ReplyBlock } from './responder.js';

export type MessageReply = Extract<Reply, { kind: 'message' }>;

/** A `slow:` answer arrives in this many text deltas, each `slowMs` after the previous one. */
export const SLOW_CHUNKS = 4;

export async function writeStream(response: ServerResponse, reply: MessageReply, signal: AbortSignal): Promise<void> {
  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': requestId(reply) });
  // Headers go out at once so a slow answer is visibly under way.
  response.flushHeaders();
  const send = (event: string, data: Record<string, unknown>): void => {
    if (!response.destroyed) response.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  };
  try {
    // Usage goes in message_start and message_delta alike: the engine reads both, and its cost reads 0 without.
    send('message_start', {
      message: { id: reply.id, type: 'message', role: 'assistant', model: reply.model, content: [], stop_reason: null, stop_sequence: null, usage: reply.usage },
    });
    for (const [index, block] of reply.content.entries()) {
      await sendBlock(send, index, block, reply.slowMs, signal);
    }
    send('message_delta', { delta: { stop_reason: reply.stopReason, stop_sequence: null }, usage: reply.usage });
    send('message_stop', {});
  } catch (error) {
    if (!signal.aborted) send('error', errorBody('api_error', error instanceof Error ? error.message : String(error)));
  } finally {
    if (!response.destroyed) response.end();
  }
}

async function sendBlock(
  send: (event: string, data: Record<string, unknown>) => void,
  index: number,
  block: ReplyBlock,
  slowMs: number | null,
  signal: AbortSignal,
): Promise<void> {
  if (block.type === 'tool_use') {
    send('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
    send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
  } else {
    send('content_block_start', { index, content_block: { type: 'text', text: '' } });
    for (const chunk of slowMs === null ? [block.text] : splitText(block.text, SLOW_CHUNKS)) {
      if (slowMs !== null) await delay(slowMs, undefined, { signal });
      send('content_block_delta', { index, delta: { type: 'text_delta', text: chunk } });
    }
  }
  // Without content_block_stop the engine drops the block.
  send('content_block_stop', { index });
}

/** The non-streaming reply; a `slow:` answer takes as long as its stream would have. */
export async function writeJson(response: ServerResponse, reply: MessageReply, signal: AbortSignal): Promise<void> {
  if (reply.slowMs !== null) await delay(reply.slowMs * SLOW_CHUNKS, undefined, { signal });
  const body = {
    id: reply.id,
    type: 'message',
    role: 'assistant',
    model: reply.model,
    content: reply.content,
    stop_reason: reply.stopReason,
    stop_sequence: null,
    usage: reply.usage,
  };
  response.writeHead(200, { 'content-type': 'application/json', 'request-id': requestId(reply) });
  response.end(JSON.stringify(body));
}

export function writeError(response: ServerResponse, status: number, errorType: string, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(errorBody(errorType, message)));
}

export function errorBody(errorType: string, message: string): Record<string, unknown> {
  return { type: 'error', error: { type: errorType, message } };
}

/** Splits by code points, never inside a surrogate pair; short texts give some empty chunks. */
export function splitText(text: string, parts: number): string[] {
  const characters = Array.from(text);
  const size = Math.ceil(characters.length / parts);
  return Array.from({ length: parts }, (_, part) => characters.slice(part * size, (part + 1) * size).join(''));
}

function requestId(reply: MessageReply): string {
  return reply.id.replace(/^msg_/, 'req_');
}
