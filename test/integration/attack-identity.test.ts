// Finding 3 of issue 23, performed against a real Berth on real Podman: "any API-token holder is any
// caller". Two named API tokens (alice, bob) and two bare ones. Alice does real work first (a run with
// the offline model, a job, an agent). Bob then asks POST /auth/token for every client_id that could name
// alice — hers, "alice", her token's identity, with slashes, case or padding changed — and with each of
// the access tokens he gets, reaches none of her work (404 on every endpoint, empty lists), while alice
// reaches all of it whatever client_id she uses. A token signed the way tokens were before (sub = the
// requested client_id, no client_id claim) is refused. Bare tokens still sign in, each its own owner.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import { bareTokenIdentity } from '../../src/api-tokens.js';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { endpointsOfOwnedWork } from '../support/callers.js';

const token = () => `berth-test-${randomBytes(16).toString('hex')}`;
const ALICE = token();
const BOB = token();
const BARE_ONE = token();
const BARE_TWO = token();
const SECRET = randomBytes(32).toString('hex');

describe('identity comes from the API token, not from client_id', () => {
  let t: TestBerth;
  const bearer = (accessToken: string) => ({ authorization: `Bearer ${accessToken}` });

  async function login(apiToken: string, clientId: string): Promise<{ access: string; refresh: string }> {
    const issued = await t.request('POST', '/auth/token', { client_id: clientId }, bearer(apiToken));
    assert.equal(issued.status, 200, `client_id ${JSON.stringify(clientId)}: ${JSON.stringify(issued.body)}`);
    return { access: issued.body.access_token, refresh: issued.body.refresh_token };
  }

  async function subOf(accessToken: string): Promise<string> {
    const validated = await t.request('POST', '/auth/validate', undefined, bearer(accessToken));
    assert.equal(validated.status, 200, JSON.stringify(validated.body));
    return validated.body.claims.sub;
  }

  before(async () => {
    t = await startTestBerth({
      SERVICE_AUTH_ENABLED: 'true',
      SERVICE_JWT_SECRET: SECRET,
      SERVICE_API_TOKENS: `alice:${ALICE}, bob:${BOB}, ${BARE_ONE}, ${BARE_TWO}`,
    });
  });
  after(async () => {
    if (!t) return;
    try {
      assert.deepEqual(await t.leftovers(), [], 'no container is left');
    } finally {
      await t.stop();
    }
  });

  test('bob asks for alice\'s client_id, her name, her identity…: he gets his own sub and none of her work', async () => {
    const alice = await login(ALICE, 'alice-laptop');
    assert.equal(await subOf(alice.access), 'alice');

    // Real work of alice's: a run with the offline model in a real container, a job, an agent.
    const run = await t.request('POST', '/run', { prompt: 'say: alice private note', workdir: '/work/shared' }, bearer(alice.access));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const session = run.body.session_id as string;
    const job = await t.request('POST', '/run/async', { prompt: 'say: alice job' }, bearer(alice.access));
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const agent = await t.request('POST', '/agents', {}, bearer(alice.access));
    assert.equal(agent.status, 200, JSON.stringify(agent.body));
    const agentId = agent.body.id as string;

    const hidden = endpointsOfOwnedWork(session, job.body.job_id, agentId);
    const pretending = ['alice-laptop', 'alice', 'Alice', ' alice', 'alice/alice-laptop', '../alice', 'alice:alice-laptop', 'token:alice', bareTokenIdentity(ALICE), ''.padEnd(256, 'alice/')];
    for (const clientId of pretending) {
      const bob = await login(BOB, clientId);
      assert.equal(await subOf(bob.access), 'bob', `bob asking for ${JSON.stringify(clientId)} is still bob`);
      for (const [method, path, body] of hidden) {
        const response = await t.request(method, path, body, bearer(bob.access));
        assert.equal(response.status, 404, `bob as ${JSON.stringify(clientId)}: ${method} ${path}: ${JSON.stringify(response.body)}`);
      }
      const lists = {
        sessions: (await t.request('GET', '/sessions', undefined, bearer(bob.access))).body.sessions,
        jobs: (await t.request('GET', '/jobs', undefined, bearer(bob.access))).body.jobs,
        agents: (await t.request('GET', '/agents', undefined, bearer(bob.access))).body.agents,
      };
      assert.deepEqual(lists, { sessions: [], jobs: [], agents: [] }, `bob as ${JSON.stringify(clientId)} lists nothing of alice's`);
      // A refresh keeps bob bob.
      const refreshed = await t.request('POST', '/auth/refresh', { refresh_token: bob.refresh });
      assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
      assert.equal(await subOf(refreshed.body.access_token), 'bob');
    }

    // A token of the kind issued before identities came from API tokens (sub = the client_id asked for,
    // no client_id claim), correctly signed: refused, as access token and as refresh token.
    const iat = Math.floor(Date.now() / 1000);
    const key = new TextEncoder().encode(SECRET);
    const legacy = (typ: string) =>
      new SignJWT({ typ }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setSubject('alice').setIssuedAt(iat).setExpirationTime(iat + 3600).setJti(randomBytes(8).toString('hex')).sign(key);
    const oldAccess = await t.request('GET', '/sessions', undefined, bearer(await legacy('access')));
    assert.deepEqual([oldAccess.status, oldAccess.body.error], [401, 'invalid token']);
    const oldRefresh = await t.request('POST', '/auth/refresh', { refresh_token: await legacy('refresh') });
    assert.deepEqual([oldRefresh.status, oldRefresh.body.error], [401, 'invalid token']);

    // Alice still has all of it, with any client_id (the console's, the CLI's…): her work is the name's.
    const viaConsole = await login(ALICE, 'berth-console');
    assert.ok((await t.request('GET', '/sessions', undefined, bearer(viaConsole.access))).body.sessions.some((s: { id: string }) => s.id === session));
    assert.equal((await t.request('GET', `/jobs/${job.body.job_id}`, undefined, bearer(viaConsole.access))).status, 200);
    assert.deepEqual((await t.request('GET', '/agents', undefined, bearer(viaConsole.access))).body.agents.map((a: { id: string }) => a.id), [agentId]);
    const resumed = await t.request('POST', '/run', { prompt: 'recall:', engine: { session_id: session, resume: true } }, bearer(alice.access));
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.match(resumed.body.output, /alice private note/);
    assert.equal((await t.request('DELETE', `/agents/${agentId}`, undefined, bearer(alice.access))).status, 204);
  });

  test('bare tokens still sign in, each its own owner named by a fingerprint', async () => {
    const one = await login(BARE_ONE, 'berth-client');
    const sub = await subOf(one.access);
    assert.equal(sub, bareTokenIdentity(BARE_ONE));
    assert.match(sub, /^token:[0-9a-f]{12}$/);
    const run = await t.request('POST', '/run', { prompt: 'say: bare note' }, bearer(one.access));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const session = run.body.session_id as string;

    // The same bare token with another client_id is the same owner; the other bare token and alice are not.
    const again = await login(BARE_ONE, 'berth-console');
    assert.ok((await t.request('GET', '/sessions', undefined, bearer(again.access))).body.sessions.some((s: { id: string }) => s.id === session));
    for (const [apiToken, clientId] of [[BARE_TWO, 'berth-client'], [BARE_TWO, sub], [ALICE, 'berth-client']] as const) {
      const other = await login(apiToken, clientId);
      assert.notEqual(await subOf(other.access), sub);
      assert.equal((await t.request('GET', `/sessions/${session}/messages`, undefined, bearer(other.access))).status, 404);
      const listed = (await t.request('GET', '/sessions', undefined, bearer(other.access))).body.sessions as { id: string }[];
      assert.ok(!listed.some((s) => s.id === session));
    }
  });
});
