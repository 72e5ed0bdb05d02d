// Reading Berth's event streams in tests: the one SSE reader every test uses, whole texts and streams as
// they arrive alike. Parsing (fields, line endings, `: ping` comments) is eventsource-parser's, the
// parser the client package uses (a dependency of packages/client, hoisted by the npm workspace).
import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One message of a stream, or one comment line (`: ping`), in the order they came. */
export type SsePiece =
  | { readonly kind: 'message'; readonly message: EventSourceMessage }
  | { readonly kind: 'comment'; readonly comment: string };

/** A parser fed text as it comes; each call answers what that text completed. */
function sseParser(): (text: string) => SsePiece[] {
  let completed: SsePiece[] = [];
  const parser = createParser({
    onEvent: (message) => completed.push({ kind: 'message', message }),
    onComment: (comment) => completed.push({ kind: 'comment', comment: comment.trim() }),
  });
  return (text) => {
    parser.feed(text);
    const pieces = completed;
    completed = [];
    return pieces;
  };
}

/** The messages among pieces, leaving out the comments. */
export function messagesIn(pieces: readonly SsePiece[]): EventSourceMessage[] {
  return pieces.flatMap((piece) => (piece.kind === 'message' ? [piece.message] : []));
}

/** The messages of a whole stream's text; a last one without its blank line is incomplete and left out, as SSE does. */
export function sseMessages(text: string): EventSourceMessage[] {
  return messagesIn(sseParser()(text));
}

/** The JSON `data` of every message of a whole stream's text (Berth's frames). */
export function sseData<T = any>(text: string): T[] {
  return sseMessages(text).map((message) => JSON.parse(message.data) as T);
}

/**
 * Reads a response's event stream as it arrives: yields, after each read, the pieces that read completed
 * (possibly none, so a caller can look again at what it holds). Leaving the loop early cancels the body.
 */
export async function* readSse(response: Response): AsyncGenerator<SsePiece[], void, undefined> {
  const feed = sseParser();
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield feed(value);
    }
  } finally {
    // Already closed or aborted when the stream ended or failed; then there is nothing to cancel.
    await reader.cancel().catch(() => undefined);
  }
}
