// The version handshake: the version of Berth's HTTP interface this SDK speaks, and the check, once per
// client, that the server's (GET /version's api_version) fits it before the first other call goes out.
// A server of another major version would answer this SDK's requests with errors that say nothing about
// versions (a 400 naming a field, a 404); one clear error up front says what to install instead.
//
// "Fits" means: the same major version, the leading whole number of api_version ("1", "1.3" and "1.12"
// fit one another; "2" does not fit "1"). Berth raises the major version only for a change that breaks
// existing clients, and may add minor versions for additions an older client can ignore.

import { BerthError } from './errors.js';

/** The version of Berth's HTTP interface this SDK speaks. */
export const API_VERSION = '1';

/**
 * What a client does when the server's API version does not fit its own: `error` (default) fails every
 * call but `version()` and `health()` with a BerthVersionError, `warn` reports it once (console.warn
 * unless `onWarning` is given) and goes on, `off` does not ask.
 */
export type ApiVersionCheck = 'error' | 'warn' | 'off';

/** True when a client speaking API version `client` can talk to a server speaking `server` (same major). */
export function apiVersionsFit(client: string, server: string): boolean {
  const clientMajor = majorOf(client);
  return clientMajor !== undefined && clientMajor === majorOf(server);
}

/** The server speaks an API version this SDK does not fit (see apiVersionsFit). */
export class BerthVersionError extends Error {
  override readonly name = 'BerthVersionError';

  constructor(
    /** Berth's base URL. */
    readonly url: string,
    /** GET /version's api_version. */
    readonly serverApiVersion: string,
    /** This SDK's API_VERSION. */
    readonly clientApiVersion: string = API_VERSION,
  ) {
    super(
      `Berth at ${url} speaks API version ${serverApiVersion}, and this @berth/client speaks API version ${clientApiVersion}: ` +
        `they do not fit (the major versions differ). Use a @berth/client (or berth command) made for API version ${majorOf(serverApiVersion) ?? serverApiVersion}, ` +
        `or a Berth that speaks API version ${majorOf(clientApiVersion) ?? clientApiVersion}.`,
    );
  }
}

function majorOf(version: string): number | undefined {
  const match = /^\s*(\d+)(?:\.\d+)*\s*$/.exec(version);
  return match ? Number(match[1]) : undefined;
}

export interface HandshakeOptions {
  readonly url: string;
  readonly mode: ApiVersionCheck;
  /** Answers GET /version's api_version (undefined when the answer has none); throws when it got no answer. */
  readonly serverApiVersion: () => Promise<string | undefined>;
  readonly warn: (message: string) => void;
}

/**
 * Asks the server's API version once, before the first call that needs it, and holds every call until it
 * knows. Only a definite answer decides: a check that got no answer (Berth unreachable) lets the call go
 * on, to fail on its own terms, and is tried again at the next call; a /version that answers an error or
 * no api_version (a proxy in front of Berth, say) is taken as unknown and not asked again.
 */
export class ApiVersionHandshake {
  private pending: Promise<void> | undefined;
  private settled = false;

  constructor(private readonly options: HandshakeOptions) {}

  /** Resolves when `path` may be sent; rejects with a BerthVersionError when the versions do not fit. */
  async before(path: string, signal?: AbortSignal | null): Promise<void> {
    // What Berth says about itself stays reachable, so that a mismatch can be looked at (berth version).
    if (this.options.mode === 'off' || path === '/version' || path === '/health') return;
    if (this.settled && this.pending === undefined) return;
    this.pending ??= this.check();
    await untilAborted(this.pending, signal);
  }

  private async check(): Promise<void> {
    let server: string | undefined;
    try {
      server = await this.options.serverApiVersion();
    } catch (error) {
      if (!(error instanceof BerthError)) {
        // No answer: the next call asks again.
        this.pending = undefined;
        return;
      }
    }
    this.settled = true;
    if (server === undefined || apiVersionsFit(API_VERSION, server)) {
      this.pending = undefined;
      return;
    }
    const mismatch = new BerthVersionError(this.options.url, server);
    if (this.options.mode === 'warn') {
      this.pending = undefined;
      this.options.warn(mismatch.message);
      return;
    }
    // Kept: every later call fails the same way, at once.
    throw mismatch;
  }
}

function untilAborted(promise: Promise<void>, signal: AbortSignal | null | undefined): Promise<void> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}
