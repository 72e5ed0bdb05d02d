// Who holds a session: one run, agent or deletion at a time. A second taker is refused with 409 rather than
// queued: two engines writing one transcript corrupt it, and a caller that retries knows its turn order,
// which a queue would hide.
import { errors } from '../../errors.js';

/** A session held by one taker until it releases it. */
export interface SessionLease {
  readonly sessionId: string;
  /** Frees the session; a second call does nothing, and never frees a later holder's lease. */
  release(): void;
}

export class SessionLeases {
  private readonly holders = new Map<string, SessionLease>();

  /** Takes the session for one holder; 409 (BERTH_ERR_SESSION_BUSY) while another holds it. */
  take(sessionId: string): SessionLease {
    if (this.holders.has(sessionId)) throw errors.sessionBusy(sessionId);
    const lease: SessionLease = {
      sessionId,
      release: () => {
        if (this.holders.get(sessionId) === lease) this.holders.delete(sessionId);
      },
    };
    this.holders.set(sessionId, lease);
    return lease;
  }

  isHeld(sessionId: string): boolean {
    return this.holders.has(sessionId);
  }
}
