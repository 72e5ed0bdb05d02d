// Server-Sent Events from a fetch response body, as an async iterator of messages. Parsing (fields,
// line endings, comments such as Berth's `: ping` heartbeats) is eventsource-parser's; this file only
// turns its callbacks into pull-based iteration and makes sure the connection is released however the
// iteration ends (completed, broken out of, aborted, failed).

import { createParser, type EventSourceMessage } from 'eventsource-parser';

export type SseMessage = EventSourceMessage;

export async function* readSse(body: ReadableStream<Uint8Array> | null): AsyncGenerator<SseMessage, void, undefined> {
  if (body === null) return;
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parsed: SseMessage[] = [];
  const parser = createParser({ onEvent: (message) => parsed.push(message) });
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        parser.feed(decoder.decode());
        // A last frame without its terminating blank line is incomplete: SSE drops it, and so do we.
        finished = true;
        yield* parsed.splice(0);
        return;
      }
      parser.feed(decoder.decode(value, { stream: true }));
      yield* parsed.splice(0);
    }
  } finally {
    // Reached early (a break, an abort, an error): closing the body closes the connection, which is how
    // Berth learns that a stream's reader has gone (a run stream then stops its run).
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
