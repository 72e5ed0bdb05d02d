// Server-Sent Events over a Fastify reply. The handler validates first (errors are JSON), then hands a
// producer to streamEvents, which owns the response from there: headers, `data:` frames, heartbeat
// comments, an `error` frame when the producer throws, the end of the response in `finally`, and an
// abort signal for when the client goes away.
import { once } from 'node:events';
import type { FastifyReply } from 'fastify';
import { BerthError, errors } from '../errors.js';

export interface SseChannel {
  /** Aborted when the client disconnects; the producer stops its work (a run: its container is removed). */
  readonly signal: AbortSignal;
  /**
   * One frame: an optional `id:` line (its id in the event log; a reconnecting client sends the last one it
   * got as Last-Event-ID), an optional `event:` line and `data: <JSON>`. Dropped once the client is gone.
   */
  send(data: unknown, event?: string, id?: number): void;
}

export interface SseOptions {
  /** Interval of `: ping` comments that keep proxies from closing an idle stream. */
  readonly heartbeatMs: number;
  readonly subscribers?: { inc(): void; dec(): void };
  /**
   * The frame sent when the producer throws; default {"type":"error","error":"<message>"}. `status` is the
   * HTTP status the error would have had as a JSON answer (500 for an unexpected one).
   */
  readonly errorFrame?: (message: string, status: number) => unknown;
  /**
   * Bytes written but not yet taken by the client beyond which, at two frames in a row, the client counts as
   * not reading: its stream is ended (as if it had disconnected) instead of Berth buffering without bound.
   */
  readonly maxBufferedBytes: number;
  /** Admits the stream against the server-wide stream limit; the returned function leaves it. */
  readonly admit?: () => () => void;
}

/** Open event streams on the whole server (SERVICE_SSE_MAX_STREAMS); beyond it a new stream is a 503. */
export class StreamLimit {
  private open = 0;

  constructor(private readonly max: number) {}

  admit(): () => void {
    if (this.open >= this.max) throw errors.streamsAtCapacity(this.max);
    this.open += 1;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.open -= 1;
    };
  }
}

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // nginx buffers responses by default; an event stream must pass through at once.
  'x-accel-buffering': 'no',
};

/**
 * Whether a request's Accept header asks for an event stream (`text/event-stream`, not with q=0). Routes
 * that answer both ways stream only then, so plain JSON clients keep their JSON answer.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => {
    const [type, ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    if (type !== 'text/event-stream') return false;
    const quality = parameters.find((parameter) => parameter.startsWith('q='));
    return quality === undefined || Number(quality.slice(2)) > 0;
  });
}

/** `event:` line content: a line break would let a value inject frames of its own. */
export function checkEventName(event: string): void {
  if (/[\r\n]/.test(event)) throw new TypeError('an SSE event name must not contain CR or LF');
}

/** One frame's bytes. JSON.stringify escapes CR and LF, so the data stays on one `data:` line. */
export function formatFrame(data: unknown, event?: string, id?: number): string {
  if (event !== undefined) checkEventName(event);
  if (id !== undefined && !(Number.isSafeInteger(id) && id >= 0)) throw new TypeError('an SSE event id must be a whole number');
  const json = JSON.stringify(data) ?? 'null';
  return `${id === undefined ? '' : `id: ${id}\n`}${event === undefined ? '' : `event: ${event}\n`}data: ${json}\n\n`;
}

/**
 * The event id a reconnecting client asks to resume after: the `Last-Event-ID` header (what EventSource
 * sends by itself), else the `last_event_id` query parameter (for clients that cannot set headers). A
 * value that is not a whole number is a 400 naming where it came from; absent: undefined.
 */
export function lastEventIdOf(header: string | string[] | undefined, query: string | undefined): number | undefined {
  const [value, field] = header !== undefined ? [Array.isArray(header) ? header[0] : header, 'Last-Event-ID'] : [query, 'last_event_id'];
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  // An empty Last-Event-ID is what EventSource sends before it got any id: a first connection.
  if (trimmed === '' && field === 'Last-Event-ID') return undefined;
  if (!/^\d{1,15}$/.test(trimmed)) throw errors.invalid(`${field}: must be the id of an event received (a whole number), got ${JSON.stringify(value.slice(0, 40))}`);
  return Number(trimmed);
}

export async function streamEvents(reply: FastifyReply, options: SseOptions, produce: (channel: SseChannel) => Promise<void>): Promise<void> {
  // Admitted before anything is sent: a refusal is still an ordinary JSON error.
  const leave = options.admit?.() ?? (() => undefined);
  const res = reply.raw;
  const controller = new AbortController();
  let open = true;
  const onClose = () => {
    open = false;
    if (!res.writableFinished) controller.abort();
  };
  // Unread bytes when the previous frame was written; see write().
  let unreadAtPreviousFrame = 0;
  const write = (text: string) => {
    if (!open || res.destroyed) return;
    // Judged before writing, over two frames: a reading client may still hold one frame larger than the limit
    // when the next follows at once (an agent's 4 MiB answer is followed by its 4 MiB result), but one that
    // left more than the limit unread from one frame to the next is not reading.
    const unread = res.writableLength;
    if (unread > options.maxBufferedBytes && unreadAtPreviousFrame > options.maxBufferedBytes) {
      // The client is not reading: end its stream as a disconnect (its run is cancelled, its agent
      // subscription left) rather than hold an unbounded buffer for it.
      reply.log.warn({ bufferedBytes: unread, limit: options.maxBufferedBytes }, 'event stream client is not reading; closing its stream');
      open = false;
      controller.abort();
      res.destroy();
      return;
    }
    unreadAtPreviousFrame = unread;
    res.write(text);
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
      send: (data, event, id) => write(formatFrame(data, event, id)),
    });
  } catch (error) {
    const known = error instanceof BerthError ? error : errors.internal('internal error; see the service log for details');
    if (!(error instanceof BerthError)) reply.log.error({ err: error }, 'event stream failed');
    write(formatFrame(options.errorFrame ? options.errorFrame(known.message, known.status) : { type: 'error', error: known.message }));
  } finally {
    clearInterval(heartbeat);
    leave();
    options.subscribers?.dec();
    if (!res.writableEnded) res.end();
    res.off('close', onClose);
  }
}

/** An event log followed for one client: the events kept after its Last-Event-ID, then live ones, until it ends. */
export interface FollowedEvents {
  readonly events: AsyncIterable<{ readonly type: string }>;
  /** Leaves the subscription (what it follows goes on). */
  close(): void;
}

/**
 * The `/stream` routes' relay: each followed event as a frame (its log id on the `id:` line only, the data
 * as it always was; `closed` with no data) until the log ends or the client leaves, which ends the
 * subscription. `waitForDrain`: wait for a slow client after each frame, so that the subscription's bounded
 * buffer (which drops and says so) fills rather than the socket's; without it the socket's buffer is
 * bounded by maxBufferedBytes alone.
 */
export function relayFollowed(reply: FastifyReply, options: SseOptions, followed: FollowedEvents, relay: { readonly waitForDrain: boolean }): Promise<void> {
  return streamEvents(reply, options, async (channel) => {
    const leave = () => followed.close();
    channel.signal.addEventListener('abort', leave, { once: true });
    if (channel.signal.aborted) leave();
    try {
      for await (const event of followed.events) {
        const { id, ...data } = event as typeof event & { id?: number };
        channel.send(event.type === 'closed' ? {} : data, event.type, id);
        if (relay.waitForDrain && reply.raw.writableNeedDrain) await once(reply.raw, 'drain', { signal: channel.signal }).catch(() => undefined);
      }
    } finally {
      channel.signal.removeEventListener('abort', leave);
      leave();
    }
  });
}
