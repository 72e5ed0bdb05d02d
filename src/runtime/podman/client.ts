// A thin JSON client for Podman's libpod REST API over its unix socket. Errors of the socket and of
// Podman are translated into PodmanApiError here, once, so callers see one error type.
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { Duplex, Readable } from 'node:stream';
import { RuntimeError } from '../ports/runtime-error.js';

const API_PREFIX = '/v4.0.0/libpod';
const tracer = trace.getTracer('berth');

/** statusCode 0: the socket could not be reached. */
export class PodmanApiError extends RuntimeError {
  constructor(
    readonly statusCode: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, statusCode === 0, options);
    this.name = 'PodmanApiError';
  }
}

export interface RequestOptions {
  readonly method?: Dispatcher.HttpMethod;
  readonly query?: Record<string, string | number | boolean | undefined>;
  readonly json?: unknown;
  readonly body?: Buffer | Readable;
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** Statuses that are answers, not errors (for example 404 for "does not exist"). */
  readonly accept?: readonly number[];
}

export class PodmanClient {
  private readonly client: Pool;

  constructor(readonly socketPath: string) {
    // Long-running calls (wait, follow logs) hold a connection each, so allow many in parallel and
    // never time out on an idle body: a run may legitimately print nothing for an hour.
    this.client = new Pool('http://podman', {
      socketPath,
      connections: 256,
      bodyTimeout: 0,
      headersTimeout: 0,
      keepAliveTimeout: 30_000,
    });
  }

  /** A span per call (ended when the answer's headers arrive): method and path with ids replaced by {id}. */
  async request(path: string, options: RequestOptions = {}): Promise<Dispatcher.ResponseData> {
    const method = options.method ?? 'GET';
    const span = tracer.startSpan(`podman ${method} ${path.replace(/\/[0-9a-f]{12,64}(?=\/|$)/g, '/{id}').replace(/\/berth-[^/]+/g, '/{name}')}`, {
      kind: SpanKind.CLIENT,
    });
    try {
      const response = await this.send(path, options);
      span.setAttribute('http.response.status_code', response.statusCode);
      return response;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message.slice(0, 200) });
      throw error;
    } finally {
      span.end();
    }
  }

  private async send(path: string, options: RequestOptions): Promise<Dispatcher.ResponseData> {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) query.set(key, String(value));
    }
    const search = query.size > 0 ? `?${query}` : '';
    const body = options.json !== undefined ? JSON.stringify(options.json) : options.body;
    const headers: Record<string, string> = {};
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    else if (options.contentType) headers['content-type'] = options.contentType;
    let response: Dispatcher.ResponseData;
    try {
      response = await this.client.request({
        path: `${API_PREFIX}${path}${search}`,
        method: options.method ?? 'GET',
        headers,
        body,
        signal: options.signal,
      });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new PodmanApiError(0, `cannot reach Podman at ${this.socketPath}: ${(error as Error).message}`, { cause: error });
    }
    if (response.statusCode >= 400 && !(options.accept ?? []).includes(response.statusCode)) {
      const text = await response.body.text().catch(() => '');
      let message = text;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? text;
      } catch {
        // Podman answered with plain text; keep it as it is.
      }
      throw new PodmanApiError(response.statusCode, `Podman ${options.method ?? 'GET'} ${path}: ${response.statusCode} ${message}`.trim());
    }
    return response;
  }

  /** An HTTP upgrade to a raw stream (libpod attach hijacks the connection with `Upgrade: tcp`). */
  async upgrade(path: string, query: Record<string, string | number | boolean>): Promise<Duplex> {
    const search = new URLSearchParams(Object.entries(query).map(([key, value]) => [key, String(value)]));
    try {
      const { socket } = await this.client.upgrade({ path: `${API_PREFIX}${path}?${search}`, method: 'POST', protocol: 'tcp' });
      return socket;
    } catch (error) {
      throw new PodmanApiError(0, `Podman POST ${path}: upgrade failed: ${(error as Error).message}`, { cause: error });
    }
  }

  async json<T>(path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.request(path, options);
    return (await response.body.json()) as T;
  }

  /** The JSON answer, or undefined when Podman answers 404 (no such container, image or secret). */
  async jsonIfFound<T>(path: string): Promise<T | undefined> {
    const response = await this.request(path, { accept: [404] });
    if (response.statusCode === 404) {
      await response.body.dump();
      return undefined;
    }
    return (await response.body.json()) as T;
  }

  /** For calls whose body does not matter; drains it so the connection is reused. */
  async call(path: string, options: RequestOptions = {}): Promise<number> {
    const response = await this.request(path, options);
    await response.body.dump();
    return response.statusCode;
  }

  /**
   * Lets the calls in flight finish for up to `graceMs`, then cuts the rest: at a detaching stop, the long
   * calls on containers Berth lets go of (a job's wait, an agent's log) would otherwise hold the process for
   * as long as those containers run (a job's engine whose model requests wait for the next start's gateway).
   */
  async close(graceMs = 2_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const closed = this.client.close().then(() => false);
    const graceOver = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs)));
    const cut = await Promise.race([closed, graceOver]);
    clearTimeout(timer);
    if (cut) await this.client.destroy();
  }
}
