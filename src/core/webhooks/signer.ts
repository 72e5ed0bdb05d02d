// Webhook signatures. The signed bytes are the decimal Unix timestamp (seconds), one ".", and the raw
// request body exactly as sent: HMAC-SHA256 keyed with SERVICE_WEBHOOK_SIGNING_SECRET, hex-encoded,
// sent as `X-Service-Signature: sha256=<hex>` beside `X-Service-Timestamp: <timestamp>`.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const TIMESTAMP_HEADER = 'X-Service-Timestamp';
export const SIGNATURE_HEADER = 'X-Service-Signature';
const PREFIX = 'sha256=';

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. */
export function signPayload(secret: string, timestamp: number, body: string | Buffer): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError(`webhook timestamp must be whole seconds, not ${timestamp}`);
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestamp}.`, 'utf8');
  hmac.update(body);
  return `${PREFIX}${hmac.digest('hex')}`;
}

/** The headers of one signed delivery; none when the secret is empty (unsigned webhooks). */
export function signatureHeaders(secret: string, timestamp: number, body: string): Record<string, string> {
  if (secret === '') return {};
  return { [TIMESTAMP_HEADER]: String(timestamp), [SIGNATURE_HEADER]: signPayload(secret, timestamp, body) };
}

/** What a receiver does: recompute over the raw body and compare in constant time. */
export function verifySignature(secret: string, timestamp: string | undefined, signature: string | undefined, rawBody: string | Buffer): boolean {
  if (secret === '' || timestamp === undefined || signature === undefined || !/^\d{1,15}$/.test(timestamp)) return false;
  const expected = Buffer.from(signPayload(secret, Number(timestamp), rawBody));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
