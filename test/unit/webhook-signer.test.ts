// The signed bytes of a webhook: "<timestamp>.<raw body>", HMAC-SHA256, hex, prefixed "sha256=".
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, signPayload, signatureHeaders, verifySignature } from '../../src/core/webhooks/signer.js';

const SECRET = 'whsec-test-0123456789';
const BODY = '{"event":"job.finished","job_id":"job-1","output":"héllo ✓"}';

describe('webhook signer', () => {
  it('signs exactly "<timestamp>.<body>" with HMAC-SHA256 in hex', () => {
    const expected = createHmac('sha256', SECRET).update(Buffer.from(`1700000000.${BODY}`, 'utf8')).digest('hex');
    assert.equal(signPayload(SECRET, 1700000000, BODY), `sha256=${expected}`);
  });

  it('matches a fixed vector', () => {
    // echo -n '1700000000.{}' | openssl dgst -sha256 -hmac key
    assert.equal(signPayload('key', 1700000000, '{}'), `sha256=${createHmac('sha256', 'key').update('1700000000.{}').digest('hex')}`);
    assert.match(signPayload('key', 1700000000, '{}'), /^sha256=[0-9a-f]{64}$/);
  });

  it('signs the same bytes whether the body is given as text or as a Buffer', () => {
    assert.equal(signPayload(SECRET, 1, BODY), signPayload(SECRET, 1, Buffer.from(BODY, 'utf8')));
  });

  it('changes with the timestamp, the body and the secret', () => {
    const base = signPayload(SECRET, 100, BODY);
    assert.notEqual(signPayload(SECRET, 101, BODY), base);
    assert.notEqual(signPayload(SECRET, 100, `${BODY} `), base);
    assert.notEqual(signPayload(`${SECRET}x`, 100, BODY), base);
  });

  it('sends both headers when a secret is set and none when it is empty', () => {
    assert.deepEqual(signatureHeaders(SECRET, 1700000000, BODY), {
      [TIMESTAMP_HEADER]: '1700000000',
      [SIGNATURE_HEADER]: signPayload(SECRET, 1700000000, BODY),
    });
    assert.deepEqual(signatureHeaders('', 1700000000, BODY), {});
  });

  it('verifies a genuine signature and rejects a tampered one', () => {
    const signature = signPayload(SECRET, 1700000000, BODY);
    assert.equal(verifySignature(SECRET, '1700000000', signature, BODY), true);
    assert.equal(verifySignature(SECRET, '1700000001', signature, BODY), false);
    assert.equal(verifySignature(SECRET, '1700000000', signature, BODY.replace('job-1', 'job-2')), false);
    assert.equal(verifySignature(SECRET, '1700000000', 'sha256=00', BODY), false);
    assert.equal(verifySignature(SECRET, undefined, signature, BODY), false);
    assert.equal(verifySignature('', '1700000000', signature, BODY), false);
  });

  it('refuses a timestamp that is not whole seconds', () => {
    assert.throws(() => signPayload(SECRET, 1.5, BODY), RangeError);
  });
});
