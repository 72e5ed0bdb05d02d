// What a failed call throws. Berth answers every error as {"error": "<message>", "status": "error"} with
// an HTTP status; the SDK turns each into a BerthError carrying both. A request that never got an answer
// is a BerthNetworkError. An aborted call rejects with the signal's reason (an `AbortError` DOMException
// unless the caller gave another), never wrapped, so `error.name === 'AbortError'` keeps working.

/** An answer of Berth with a non-2xx status. */
export class BerthError extends Error {
  override readonly name = 'BerthError';
  /** The HTTP status, e.g. 404. */
  readonly status: number;
  /** Berth's own text of the error (the body's `error` field), e.g. `job job-… not found`. */
  readonly error: string;
  /** The parsed body as answered (JSON when it was JSON, else its text). */
  readonly body?: unknown;

  constructor(status: number, error: string, body?: unknown) {
    super(error);
    this.status = status;
    this.error = error;
    this.body = body;
  }

  /** Reads a non-2xx response into a BerthError; a body that is not Berth's error shape keeps its text. */
  static async fromResponse(response: Response): Promise<BerthError> {
    const text = await response.text().catch(() => '');
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's error page, for instance): the text is all there is.
    }
    const message =
      typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string'
        ? (body as { error: string }).error
        : text.trim() || `${response.status} ${response.statusText}`.trim();
    return new BerthError(response.status, message, body);
  }
}

/** A request that got no answer: Berth unreachable, the connection dropped, or a stream cut off. */
export class BerthNetworkError extends Error {
  override readonly name = 'BerthNetworkError';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** True for the rejection of an aborted call (whatever reason the signal carried). */
export function isAbortError(error: unknown, signal?: AbortSignal): boolean {
  if (signal?.aborted && error === signal.reason) return true;
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}
