// Who is asking. Every session, job and agent belongs to the caller that created it: the `sub` of the
// access token it was created with, which is the identity of the API token that obtained that access
// token (its name in SERVICE_API_TOKENS, or a bare token's fingerprint; api-tokens.ts), never anything the
// caller asked for. Other callers get 404 for it and never see it listed. Per-caller limits count per
// owner too, so inventing client_ids does not multiply them. With authentication off there is one
// caller, and so one owner.
export interface Caller {
  readonly owner: string;
}

/** The one caller when authentication is off (also the owner of records from before owners existed). */
export const SOLE_CALLER: Caller = Object.freeze({ owner: '' });

export function callerOf(sub: string | undefined): Caller {
  return sub === undefined ? SOLE_CALLER : { owner: sub };
}
