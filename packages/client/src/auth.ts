// The /auth endpoints as calls that keep the client's tokens current: token() logs in with an API token,
// refresh() rotates the pair, logout() revokes it and forgets it. Every pair obtained is saved to the
// client's TokenStore, and later calls use it.

import { answer, type Api } from './api.js';
import type { TokenEndpoints, TokenManager } from './tokens.js';
import type { CallOptions, LogoutResult, TokenPair, TokenValidation } from './types.js';

/** POST /auth/token and POST /auth/refresh: what the TokenManager needs, and auth.token/refresh use. */
export function tokenEndpoints(api: Api) {
  return {
    async exchange(apiToken: string, clientId: string, signal?: AbortSignal) {
      // The API token is this call's credential, sent in place of an access token.
      return answer(await api.POST('/auth/token', { body: { client_id: clientId }, headers: { authorization: `Bearer ${apiToken}` }, signal }));
    },
    async refresh(refreshToken: string, signal?: AbortSignal) {
      return answer(await api.POST('/auth/refresh', { body: { refresh_token: refreshToken }, signal }));
    },
  } satisfies TokenEndpoints;
}

export class Auth {
  private readonly endpoints: ReturnType<typeof tokenEndpoints>;

  constructor(
    private readonly api: Api,
    private readonly tokens: TokenManager,
    private readonly clientId: string,
  ) {
    this.endpoints = tokenEndpoints(api);
  }

  /** Exchanges an API token for an access and a refresh token, and keeps them. */
  async token(apiToken: string, clientId: string = this.clientId, options: CallOptions = {}): Promise<TokenPair> {
    const pair = await this.endpoints.exchange(apiToken, clientId, options.signal);
    await this.tokens.adopt(pair);
    return pair;
  }

  /** Exchanges the kept refresh token for a new pair (the old refresh token stops working), and keeps it. */
  async refresh(options: CallOptions = {}): Promise<TokenPair> {
    const refreshToken = (await this.tokens.current())?.refresh_token;
    if (refreshToken === undefined) throw new Error('no refresh token: log in first (auth.token)');
    const pair = await this.endpoints.refresh(refreshToken, options.signal);
    await this.tokens.adopt(pair);
    return pair;
  }

  /** The subject and expiry of the access token in use (401 BerthError when it is not valid). */
  async validate(options: CallOptions = {}): Promise<TokenValidation> {
    return answer(await this.api.POST('/auth/validate', { signal: options.signal }));
  }

  /** Revokes the access token and the kept refresh token, and removes them from the TokenStore. */
  async logout(options: CallOptions = {}): Promise<LogoutResult> {
    const refreshToken = (await this.tokens.current())?.refresh_token;
    const body = refreshToken === undefined ? {} : { refresh_token: refreshToken };
    const result = answer(await this.api.POST('/auth/logout', { body, signal: options.signal }));
    await this.tokens.save(undefined);
    return result;
  }
}
