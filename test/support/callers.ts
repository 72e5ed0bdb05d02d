// A test Berth with authentication on, and access tokens for named callers. Callers are told apart by
// their API token (SERVICE_API_TOKENS=name:token,...), so each name gets an API token of its own.
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth } from './berth.js';

export async function startBerthWithCallers<const N extends string>(
  names: readonly N[],
  env: Record<string, string> = {},
): Promise<{ t: TestBerth; as: (name: N) => Record<string, string>; apiTokenOf: (name: N) => string }> {
  const apiTokens = new Map(names.map((name) => [name, `berth-test-${randomBytes(16).toString('hex')}`] as const));
  const configured = [...apiTokens].map(([name, token]) => `${name}:${token}`).join(',');
  const t = await startTestBerth({ SERVICE_AUTH_ENABLED: 'true', SERVICE_JWT_SECRET: randomBytes(32).toString('hex'), SERVICE_API_TOKENS: configured, ...env });
  const tokens = new Map<N, string>();
  for (const name of names) {
    const issued = await t.request('POST', '/auth/token', { client_id: name }, { authorization: `Bearer ${apiTokens.get(name)}` });
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    tokens.set(name, issued.body.access_token);
  }
  return { t, as: (name) => ({ authorization: `Bearer ${tokens.get(name)}` }), apiTokenOf: (name) => apiTokens.get(name)! };
}
