// The one check for "Berth refused this input": the validation function that assert.throws and assert.rejects
// take. It asserts rather than answering false, so a failing test names the status or message it got.
import assert from 'node:assert/strict';
import { BerthError } from '../../../src/errors.js';

/** The error is a BerthError with this status whose message matches `expected` (a string must be the whole message). */
export function refused(expected: RegExp | string, status = 400): (error: unknown) => true {
  return (error) => {
    assert.ok(error instanceof BerthError, `expected a BerthError, got ${String(error)}`);
    assert.equal(error.status, status, `status of "${error.message}"`);
    if (typeof expected === 'string') assert.equal(error.message, expected);
    else assert.match(error.message, expected);
    return true;
  };
}
