// The entries of SERVICE_API_TOKENS and whom each one stands for. An API token is the only thing a caller
// proves when it asks for an access token, so it is also what tells callers apart: every access token
// carries the identity of the API token that obtained it as its `sub`, whatever `client_id` was asked for.
//
//   name:token   a named API token; its callers are the owner `name`.
//   token        a bare (unnamed) API token, as before names existed; its callers are the owner
//                `token:<fingerprint>`, a fingerprint of that token alone. Two bare tokens are two owners.
//
// Names and fingerprints cannot collide: a name never contains ':' (it ends at the first one), a
// fingerprint identity always does. Nothing here echoes a token, or a name (it may be the start of a
// token written before names existed): problems are reported by the entry's position.
import { createHash } from 'node:crypto';

export interface ApiToken {
  /** The `sub` of every token issued for this API token: its name, or `token:<fingerprint>` when bare. */
  readonly identity: string;
  readonly token: string;
  readonly named: boolean;
  /**
   * A stable, non-secret fingerprint of the token (apiTokenFingerprint). Access and refresh tokens carry it,
   * so replacing a named token's value ends the sessions the old value opened while the name stays.
   */
  readonly fingerprint: string;
}

/** What a name may look like: a letter or digit, then letters, digits, '.', '_' or '-'; at most 64 characters. */
export const API_TOKEN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The prefix of a bare token's identity; ':' is never part of a name. */
export const BARE_IDENTITY_PREFIX = 'token:';

// 48 bits: enough to tell a handful of tokens apart (collisions are refused at start), too few to help
// anyone guess a token from an identity seen in a log.
const FINGERPRINT_HEX_LENGTH = 12;

/** A problem with one entry; `position` counts from 1. The message never contains the entry. */
export class ApiTokenEntryError extends Error {
  constructor(
    readonly position: number,
    readonly count: number,
    problem: string,
  ) {
    super(`entry ${position} of ${count} ${problem}`);
    this.name = 'ApiTokenEntryError';
  }
}

/** The stable, non-secret fingerprint of an API token. */
export function apiTokenFingerprint(token: string): string {
  return createHash('sha256').update('berth api token identity\n').update(token, 'utf8').digest('hex').slice(0, FINGERPRINT_HEX_LENGTH);
}

/** The identity of a bare API token. */
export function bareTokenIdentity(token: string): string {
  return `${BARE_IDENTITY_PREFIX}${apiTokenFingerprint(token)}`;
}

/**
 * Reads the (already split and trimmed) entries. Throws ApiTokenEntryError for a name that does not match
 * API_TOKEN_NAME_PATTERN, a name used twice (case-insensitively: `Alice` and `alice` would read as one
 * caller in logs), a token listed twice (it could not stand for two owners), or two bare tokens whose
 * identities collide.
 */
export function parseApiTokens(entries: readonly string[]): ApiToken[] {
  const parsed: ApiToken[] = [];
  const positionOfIdentity = new Map<string, number>();
  const positionOfToken = new Map<string, number>();
  for (const [index, entry] of entries.entries()) {
    const position = index + 1;
    const fail = (problem: string) => new ApiTokenEntryError(position, entries.length, problem);
    const colon = entry.indexOf(':');
    const named = colon !== -1;
    const name = named ? entry.slice(0, colon).trim() : undefined;
    const token = named ? entry.slice(colon + 1).trim() : entry;
    if (name !== undefined && !API_TOKEN_NAME_PATTERN.test(name)) {
      throw fail(
        'has a name (the part before the first ":") that is not 1 to 64 letters, digits, ".", "_" or "-" starting with a letter or digit; write entries as name:token, or the token alone',
      );
    }
    if (token === '') throw fail('has a name but no token after the ":"');
    const identity = name ?? bareTokenIdentity(token);
    const identityKey = identity.toLowerCase();
    const earlierToken = positionOfToken.get(token);
    if (earlierToken !== undefined) throw fail(`repeats the token of entry ${earlierToken}; every entry needs its own token`);
    const earlierIdentity = positionOfIdentity.get(identityKey);
    if (earlierIdentity !== undefined) {
      throw fail(named ? `repeats the name of entry ${earlierIdentity} (names are compared ignoring case)` : `has the same fingerprint as entry ${earlierIdentity}; give one of them a name`);
    }
    positionOfToken.set(token, position);
    positionOfIdentity.set(identityKey, position);
    parsed.push({ identity, token, named, fingerprint: apiTokenFingerprint(token) });
  }
  return parsed;
}
