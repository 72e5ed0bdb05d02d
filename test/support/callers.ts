// A test Berth with authentication on, and access tokens for named callers. Callers are told apart by
// their API token (SERVICE_API_TOKENS=name:token,...), so each name gets an API token of its own.
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth, type TestBerthOptions } from './berth.js';

export async function startBerthWithCallers<const N extends string>(
  names: readonly N[],
  env: Record<string, string> = {},
  options: TestBerthOptions = {},
): Promise<{ t: TestBerth; as: (name: N) => Record<string, string>; apiTokenOf: (name: N) => string }> {
  const apiTokens = new Map(names.map((name) => [name, `berth-test-${randomBytes(16).toString('hex')}`] as const));
  const configured = [...apiTokens].map(([name, token]) => `${name}:${token}`).join(',');
  const t = await startTestBerth({ SERVICE_AUTH_ENABLED: 'true', SERVICE_JWT_SECRET: randomBytes(32).toString('hex'), SERVICE_API_TOKENS: configured, ...env }, options);
  const tokens = new Map<N, string>();
  for (const name of names) {
    const issued = await t.request('POST', '/auth/token', { client_id: name }, { authorization: `Bearer ${apiTokens.get(name)}` });
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    tokens.set(name, issued.body.access_token);
  }
  return { t, as: (name) => ({ authorization: `Bearer ${tokens.get(name)}` }), apiTokenOf: (name) => apiTokens.get(name)! };
}

/** Every endpoint that reaches one caller's session, job or agent: each must answer 404 to another caller. */
export function endpointsOfOwnedWork(session: string, jobId: string, agentId: string): [method: string, path: string, body?: unknown][] {
  return [
    ['GET', `/sessions/${session}/messages`],
    ['GET', `/sessions/${session}/messages/00000000-0000-4000-8000-000000000000`],
    ['DELETE', `/sessions/${session}`],
    ['POST', '/run', { prompt: 'recall:', engine: { session_id: session, resume: true } }],
    ['POST', '/run', { prompt: 'recall:', engine: { session_id: session, fork_session: true } }],
    ['POST', '/run/async', { prompt: 'recall:', engine: { session_id: session, resume: true } }],
    ['GET', `/run/stream?${new URLSearchParams({ prompt: 'recall:', session_id: session })}`],
    ['GET', `/jobs/${jobId}`],
    ['DELETE', `/jobs/${jobId}`],
    ['GET', `/agents/${agentId}`],
    ['POST', `/agents/${agentId}/send`, { prompt: 'say: hijack' }],
    ['GET', `/agents/${agentId}/stream`],
    ['DELETE', `/agents/${agentId}`],
  ];
}
