// The leases on their own: who holds a session, and the 409 a second taker gets.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionLeases } from '../../src/core/sessions/session-leases.js';
import { refused } from './support/refused.js';

const A = '123e4567-e89b-12d3-a456-426614174000';
const B = '223e4567-e89b-12d3-a456-426614174000';

describe('session leases', () => {
  it('a second taker is refused with 409 naming the session, not queued', () => {
    const leases = new SessionLeases();
    leases.take(A);
    assert.throws(() => leases.take(A), refused(`session ${A} is in use by another run; retry when it has finished`, 409));
    assert.throws(() => leases.take(A), (error: unknown) => (error as { code?: string }).code === 'BERTH_ERR_SESSION_BUSY');
  });

  it('holds each session apart: taking one leaves another free', () => {
    const leases = new SessionLeases();
    leases.take(A);
    assert.equal(leases.isHeld(A), true);
    assert.equal(leases.isHeld(B), false);
    assert.equal(leases.take(B).sessionId, B);
  });

  it('a released session can be taken again', () => {
    const leases = new SessionLeases();
    leases.take(A).release();
    assert.equal(leases.isHeld(A), false);
    assert.equal(leases.take(A).sessionId, A);
    assert.equal(leases.isHeld(A), true);
  });

  it('releasing twice never frees the lease of the holder that came after', () => {
    const leases = new SessionLeases();
    const first = leases.take(A);
    first.release();
    leases.take(A);
    first.release();
    assert.equal(leases.isHeld(A), true);
    assert.throws(() => leases.take(A), refused(/in use by another run/, 409));
  });
});
