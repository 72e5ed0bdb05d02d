// Server-Sent Events over a Fastify reply. The handler validates first (errors are JSON), then hands a
// producer to streamEvents, which owns the response from there: headers, `data:` frames, heartbeat
// comments, an `error` frame when the producer throws, the end of the response in `finally`, and an
// abort signal for when the client goes away.
import type { FastifyReply } from 'fastify';
import { BerthError } from '../errors.js';

export interface SseChannel {
  /** Aborted when the client disconnects; the producer stops its work (a run: its container is removed). */
  readonly signal: AbortSignal;
  /** One frame: an optional `event:` line and `data: <JSON>`. Dropped once the client is gone. */
  send(data: unknown, event?: string): void;
}

export interface SseOptions {
  /** Interval of `: ping` comments that keep proxies from closing an idle stream. */
  readonly heartbeatMs: number;
  readonly subscribers?: { inc(): void; dec(): void };
  /** The frame sent when the producer throws; default {"type":"error","error":"<message>"}. */
  readonly errorFrame?: (message: string) => unknown;
}

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // nginx buffers responses by default; an event stream must pass through at once.
  'x-accel-buffering': 'no',
};

/** `event:` line content: a line break would let a value inject frames of its own. */
export function checkEventName(event: string): void {
  if (/[\r\n]/.test(event)) throw new TypeError('an SSE event name must not contain CR or LF');
}

/** One frame's bytes. JSON.stringify escapes CR and LF, so the data stays on one `data:` line. */
export function formatFrame(data: unknown, event?: string): string {
  if (event !== undefined) checkEventName(event);
  const json = JSON.stringify(data) ?? 'null';
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${json}\n\n`;
}

export async function streamEvents(reply: FastifyReply, options: SseOptions, produce: (channel: SseChannel) => Promise<void>): Promise<void> {
  const res = reply.raw;
  const controller = new AbortController();
  let open = true;
  const onClose = () => {
    open = false;
    if (!res.writableFinished) controller.abort();
  };
  const write = (text: string) => {
    if (open && !res.destroyed) res.write(text);
  };
  res.on('close', onClose);
  // A write racing the disconnect must not become an unhandled 'error' event.
  res.on('error', onClose);
  // The client may have left while the request was being validated, before there was a listener.
  if (res.destroyed || !res.socket || res.socket.destroyed) {
    open = false;
    controller.abort();
  }

  reply.hijack();
  options.subscribers?.inc();
  const heartbeat = setInterval(() => write(': ping\n\n'), options.heartbeatMs);
  heartbeat.unref();
  try {
    res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...HEADERS });
    res.flushHeaders();
    await produce({
      signal: controller.signal,
      send: (data, event) => write(formatFrame(data, event)),
    });
  } catch (error) {
    const message = error instanceof BerthError ? error.message : 'internal error; see the service log for details';
    if (!(error instanceof BerthError)) reply.log.error({ err: error }, 'event stream failed');
    write(formatFrame(options.errorFrame ? options.errorFrame(message) : { type: 'error', error: message }));
  } finally {
    clearInterval(heartbeat);
    options.subscribers?.dec();
    if (!res.writableEnded) res.end();
    res.off('close', onClose);
  }
}
