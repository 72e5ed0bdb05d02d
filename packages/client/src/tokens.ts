// Access and refresh tokens: where they are kept (a TokenStore the application chooses), and when they
// are obtained or renewed. An API token is exchanged for a pair on first need; a pair is refreshed
// shortly before its access token expires and, should the server still answer 401, once more after it.
// Refresh tokens are single-use on the server, so at most one exchange or refresh runs at a time and
// every request waiting for a token shares its result.

/** A pair of tokens as the SDK keeps it. */
export interface Tokens {
  /** Sent as `Authorization: Bearer <access_token>`. */
  access_token: string;
  /** Single-use; rotated by every refresh. */
  refresh_token?: string;
  /** When the access token expires, in epoch milliseconds. */
  expires_at?: number;
}

/** Where tokens are loaded from and saved to: a file for a CLI, sessionStorage for a web page, memory for a script. */
export interface TokenStore {
  load(): Promise<Tokens | undefined> | Tokens | undefined;
  /** Called with the new pair after every exchange and refresh, and with `undefined` once they are unusable or logged out. */
  save(tokens: Tokens | undefined): Promise<void> | void;
}

/** Keeps tokens in memory for the life of the process or page. */
export class MemoryTokenStore implements TokenStore {
  constructor(private tokens?: Tokens) {}

  load(): Tokens | undefined {
    return this.tokens;
  }

  save(tokens: Tokens | undefined): void {
    this.tokens = tokens;
  }
}

/** The token-pair answer of POST /auth/token and POST /auth/refresh. */
export interface IssuedPair {
  access_token: string;
  refresh_token: string;
  expires_in: number;
}

/** The calls a TokenManager makes; the Berth client implements them over HTTP. */
export interface TokenEndpoints {
  exchange(apiToken: string, clientId: string, signal?: AbortSignal): Promise<IssuedPair>;
  refresh(refreshToken: string, signal?: AbortSignal): Promise<IssuedPair>;
}

export interface TokenManagerOptions {
  readonly accessToken?: string;
  readonly apiToken?: string;
  readonly clientId: string;
  readonly store: TokenStore;
  readonly endpoints: TokenEndpoints;
  readonly now?: () => number;
}

/**
 * An access token this close to its expiry is refreshed before it is used; a token living less than four
 * times as long is refreshed in the last quarter of its life instead, so that a fresh one is not
 * already "about to expire".
 */
export const REFRESH_MARGIN_MS = 10_000;

/** The lifetime (exp − iat) a JWT states, in milliseconds; undefined when it cannot be read. */
export function jwtLifetimeMs(token: string): number | undefined {
  try {
    const payload = token.split('.')[1] ?? '';
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(payload.length / 4) * 4, '='));
    const { iat, exp } = JSON.parse(json) as { iat?: unknown; exp?: unknown };
    return typeof iat === 'number' && typeof exp === 'number' && exp > iat ? (exp - iat) * 1000 : undefined;
  } catch {
    return undefined;
  }
}

export function tokensFromPair(pair: IssuedPair, now: number): Tokens {
  return { access_token: pair.access_token, refresh_token: pair.refresh_token, expires_at: now + pair.expires_in * 1000 };
}

export class TokenManager {
  private loaded?: Promise<Tokens | undefined>;
  private pending?: Promise<Tokens | undefined>;
  private readonly now: () => number;

  constructor(private readonly options: TokenManagerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * The Authorization header for a protected call, or undefined when there is nothing to send (a
   * server without authentication needs none).
   */
  async authorization(): Promise<string | undefined> {
    if (this.options.accessToken !== undefined) return `Bearer ${this.options.accessToken}`;
    let tokens = await this.current();
    if (tokens === undefined && this.options.apiToken !== undefined) tokens = await this.renew(undefined);
    else if (tokens && this.expiresSoon(tokens) && (tokens.refresh_token || this.options.apiToken)) tokens = await this.renew(tokens.access_token);
    return tokens ? `Bearer ${tokens.access_token}` : undefined;
  }

  /**
   * After a 401 to a request sent with `sentAuthorization`: obtains a new access token when possible.
   * True when the request should be sent again.
   */
  async recover(sentAuthorization: string): Promise<boolean> {
    if (this.options.accessToken !== undefined) return false;
    const tokens = await this.current();
    // Another request renewed the token meanwhile: the new one is worth a try.
    if (tokens && `Bearer ${tokens.access_token}` !== sentAuthorization) return true;
    if (!tokens?.refresh_token && this.options.apiToken === undefined) return false;
    const renewed = await this.renew(tokens?.access_token);
    return renewed !== undefined && `Bearer ${renewed.access_token}` !== sentAuthorization;
  }

  /** Saves a pair obtained outside the manager (auth.token, auth.refresh) as the current one. */
  async adopt(pair: IssuedPair): Promise<Tokens> {
    const tokens = tokensFromPair(pair, this.now());
    await this.save(tokens);
    return tokens;
  }

  /** The stored tokens, loaded from the store once. */
  async current(): Promise<Tokens | undefined> {
    this.loaded ??= Promise.resolve(this.options.store.load());
    return this.loaded;
  }

  async save(tokens: Tokens | undefined): Promise<void> {
    this.loaded = Promise.resolve(tokens);
    await this.options.store.save(tokens);
  }

  private expiresSoon(tokens: Tokens): boolean {
    if (tokens.expires_at === undefined) return false;
    const lifetime = jwtLifetimeMs(tokens.access_token);
    const margin = lifetime === undefined ? REFRESH_MARGIN_MS : Math.min(REFRESH_MARGIN_MS, lifetime / 4);
    return tokens.expires_at - margin <= this.now();
  }

  /**
   * Refreshes (or exchanges the API token), once for everyone who asks while it runs. `replacing` is the
   * access token the caller holds: when the current one already differs, it is returned as is.
   */
  private renew(replacing: string | undefined): Promise<Tokens | undefined> {
    this.pending ??= (async () => {
      try {
        const tokens = await this.current();
        if (tokens && tokens.access_token !== replacing) return tokens;
        return await this.obtain(tokens);
      } finally {
        this.pending = undefined;
      }
    })();
    return this.pending;
  }

  private async obtain(tokens: Tokens | undefined): Promise<Tokens | undefined> {
    const { apiToken, clientId, endpoints } = this.options;
    if (tokens?.refresh_token) {
      try {
        return await this.adopt(await endpoints.refresh(tokens.refresh_token));
      } catch (error) {
        // A refused refresh token (expired, used, revoked) is worth nothing any more; other failures
        // (network, 503) leave the pair for a later attempt.
        if (!isUnauthorized(error)) throw error;
        if (apiToken === undefined) {
          await this.save(undefined);
          return undefined;
        }
      }
    }
    if (apiToken === undefined) return tokens;
    return this.adopt(await endpoints.exchange(apiToken, clientId));
  }
}

function isUnauthorized(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { status?: unknown }).status === 401;
}
