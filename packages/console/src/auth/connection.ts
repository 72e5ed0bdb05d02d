// Who the console talks to Berth as. At start: the tokens this tab kept are checked; without any, a server
// without authentication needs none, and any other asks for a token on the sign-in page. Sign-in takes an API token (exchanged through the SDK for an
// access and a refresh token; the SDK refreshes them) or an access token (used until it expires).
import { Berth, BerthError, MemoryTokenStore, type TokenStore } from '@berth/client';
import { TabTokenStore } from './tab-token-store.js';

/**
 * The `client_id` of the console's tokens: a label in Berth's tokens and logs, nothing more. Who is signed
 * in (the tokens' `sub`, the owner of the runs, jobs, sessions and agents this tab sees) is the API token
 * pasted at sign-in: its name in SERVICE_API_TOKENS, so two people with two API tokens are never one owner.
 */
export const CLIENT_ID = 'berth-console';

export type Connection =
  | { readonly state: 'checking' }
  | { readonly state: 'unreachable'; readonly error: unknown }
  | { readonly state: 'signed-out'; readonly notice?: string }
  | { readonly state: 'signed-in'; readonly berth: Berth; readonly subject?: string; readonly open: boolean };

function client(tokens: TokenStore = new TabTokenStore()): Berth {
  return new Berth({ url: window.location.origin, tokens, clientId: CLIENT_ID });
}

const isUnauthorized = (error: unknown) => error instanceof BerthError && error.status === 401;

/** An access token is a JWT (three base64url parts, the first a JSON header); anything else is taken for an API token. */
export function looksLikeAccessToken(token: string): boolean {
  return /^eyJ[\w-]*\.[\w-]+\.[\w-]*$/.test(token);
}

/**
 * Whether Berth checks tokens, read from its OpenAPI document (an open route): a server started with
 * SERVICE_AUTH_ENABLED=false declares no security requirement. Asking a protected route instead would
 * answer 401, which a browser reports as an error in the page's console.
 */
async function checksTokens(): Promise<boolean> {
  const response = await window.fetch(new URL('/swagger/doc.json', window.location.origin), { headers: { accept: 'application/json' } });
  if (!response.ok) throw await BerthError.fromResponse(response);
  const document = (await response.json()) as { security?: unknown };
  return !(Array.isArray(document.security) && document.security.length === 0);
}

/** The connection this tab starts with. */
export async function connect(): Promise<Connection> {
  const store = new TabTokenStore();
  let notice: string | undefined;
  if (store.load() !== undefined) {
    const berth = client(store);
    try {
      const { claims } = await berth.auth.validate();
      return { state: 'signed-in', berth, subject: claims.sub, open: false };
    } catch (error) {
      if (!isUnauthorized(error)) return { state: 'unreachable', error };
      store.save(undefined);
      notice = 'Your session has ended. Sign in again.';
    }
  }
  try {
    if (!(await checksTokens())) return { state: 'signed-in', berth: client(new MemoryTokenStore()), open: true };
    return { state: 'signed-out', notice };
  } catch (error) {
    return { state: 'unreachable', error };
  }
}

/** Signs in with an API token or an access token; throws a BerthError when Berth refuses it. */
export async function signIn(token: string): Promise<Connection> {
  const store = new TabTokenStore();
  const berth = client(store);
  if (looksLikeAccessToken(token)) store.save({ access_token: token });
  else await berth.auth.token(token, CLIENT_ID);
  try {
    const { claims } = await berth.auth.validate();
    return { state: 'signed-in', berth, subject: claims.sub, open: false };
  } catch (error) {
    store.save(undefined);
    throw error;
  }
}

/** Logs the tab's tokens out at Berth (best effort) and forgets them. */
export async function signOut(connection: Connection): Promise<void> {
  if (connection.state === 'signed-in' && !connection.open) {
    await connection.berth.auth.logout().catch(() => undefined);
  }
  new TabTokenStore().save(undefined);
}
