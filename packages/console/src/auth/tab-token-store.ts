// The console's tokens live in sessionStorage: they stay with this browser tab (a reload keeps you signed
// in), are not shared with other tabs and are gone when the tab closes. The API token itself is never
// stored: it is exchanged once, at sign-in, for an access and a refresh token.
import type { TokenStore, Tokens } from '@berth/client';

const KEY = 'berth.console.tokens';

export class TabTokenStore implements TokenStore {
  constructor(private readonly storage: Storage = window.sessionStorage) {}

  load(): Tokens | undefined {
    const text = this.storage.getItem(KEY);
    if (text === null) return undefined;
    try {
      const tokens = JSON.parse(text) as Partial<Tokens>;
      return typeof tokens.access_token === 'string' ? (tokens as Tokens) : undefined;
    } catch {
      return undefined;
    }
  }

  save(tokens: Tokens | undefined): void {
    if (tokens === undefined) this.storage.removeItem(KEY);
    else this.storage.setItem(KEY, JSON.stringify(tokens));
  }
}
