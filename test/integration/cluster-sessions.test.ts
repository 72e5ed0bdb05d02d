// Sessions and their workspaces survive their node (issue 26): two real Berths on one throw-away PostgreSQL
// (test/support/postgres.ts) and one SERVICE_SHARED_DIR, authentication on, two callers. A run on node A makes
// a session whose workspace gets a file, and plants a link to the host's /etc/shadow in it; node A is stopped
// and its data directory (session directories, workspace disks) removed. On node B: the session is listed and
// its messages read; a resume sees the earlier conversation (the offline model's `recall:`) and the file at its
// workdir; the workspace's file is read through the API; the planted link is still a link, and no answer of
// the API (file, listing, archive) holds the host's shadow file. Caller 2 can neither read nor resume caller 1's
// session, nor read its workspace, through node B. The saved copy is Berth's only (0600 in a 0700 directory).
// Nothing is left: containers and networks (each test Berth's stop), PostgreSQL's processes and directory, the
// shared directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { ClusterCallers, clusterNodeEnv, queryDatabase, stopCluster } from '../support/cluster-nodes.js';
import { waitFor } from '../support/wait.js';
import { freePort, startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';

const callers = new ClusterCallers(['alice', 'bob'] as const);
const MARK = `kept-on-a-${randomBytes(4).toString('hex')}`;

describe('a session and its workspace, made on node A, on node B once A is gone', () => {
  let server: TestPostgres;
  let address: PostgresDatabaseAddress;
  let shared: string;
  let a: TestBerth | undefined;
  let b: TestBerth | undefined;
  let sessionId: string;
  let workspaceId: string;
  let hostShadow: string;

  const nodeEnv = async (name: string) => clusterNodeEnv(address, { name, port: await freePort() }, callers, { SERVICE_SHARED_DIR: shared });
  const as = (caller: 'alice' | 'bob') => callers.as(caller);

  before(async () => {
    hostShadow = await readFile('/etc/shadow', 'utf8');
    server = await startPostgres();
    address = await server.createDatabase('cluster_sessions');
    shared = await mkdtemp(join(tmpdir(), 'berth-shared-'));
    a = await startTestBerth(await nodeEnv('node-a'));
    await callers.signIn(a);
  });

  after(() => stopCluster([a, b], server, () => rm(shared, { recursive: true, force: true })));

  test('node A: a run makes a session whose workspace gets a file and a planted link to /etc/shadow; both are saved', async () => {
    const run = await a!.request('POST', '/run', { prompt: `run: echo ${MARK} > notes.txt && ln -s /etc/shadow shadow-link && echo done` }, as('alice'));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    sessionId = run.body.session_id as string;
    const listed = await a!.request('GET', '/workspaces', undefined, as('alice'));
    const own = listed.body.workspaces.find((ws: { sessions: string[] }) => ws.sessions.includes(sessionId));
    assert.ok(own, JSON.stringify(listed.body));
    workspaceId = own.id as string;
    await a!.berth.settled();

    const copies = join(shared, 'workspaces');
    assert.equal((await stat(copies)).mode & 0o777, 0o700);
    assert.deepEqual((await readdir(copies)).filter((name) => !name.startsWith('.')), [`${workspaceId}.tar`]);
    assert.equal((await stat(join(copies, `${workspaceId}.tar`))).mode & 0o777, 0o600);

    // An agent's session is saved at the end of each turn, while the agent lives on.
    const spawned = await a!.request('POST', '/agents', { prompt: `say: agent turn ${MARK}` }, as('alice'));
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    await waitFor('the agent\'s first turn to end', async () => {
      const agent = await a!.request('GET', `/agents/${spawned.body.id}`, undefined, as('alice'));
      return agent.body.turns_completed === 1 ? agent.body : undefined;
    }, 60_000, 200);
    const saved = await waitFor('the agent\'s session in the database', async () => {
      const rows = await queryDatabase<{ hidden: boolean; node: string; content: Buffer }>(
        address,
        'SELECT s.hidden, s.node, t.content FROM sessions s JOIN session_transcripts t ON t.session_id = s.id WHERE s.id = $1',
        [spawned.body.session_id],
      );
      return rows.find((row) => row.content.toString('utf8').includes(`agent turn ${MARK}`));
    }, 10_000, 200);
    assert.equal(saved.hidden, true);
    assert.equal(saved.node, 'node-a');
    assert.equal((await a!.request('GET', `/agents/${spawned.body.id}`, undefined, as('alice'))).body.status, 'idle', 'saved while the agent lives on');

    // Node A goes, and everything of it on its host with it: session directories, workspace disks.
    await a!.stop();
    a = undefined;
    b = await startTestBerth(await nodeEnv('node-b'));
  });

  test('node B: the session is listed and read, a resume sees the earlier conversation and the file', async () => {
    const listed = await b!.request('GET', '/sessions', undefined, as('alice'));
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.deepEqual(listed.body.sessions.map((s: { id: string }) => s.id), [sessionId]);
    const messages = await b!.request('GET', `/sessions/${sessionId}/messages`, undefined, as('alice'));
    assert.equal(messages.status, 200, JSON.stringify(messages.body));
    assert.match(JSON.stringify(messages.body.messages), new RegExp(`echo ${MARK}`));

    const recalled = await b!.request('POST', '/run', { prompt: 'recall:', engine: { session_id: sessionId, resume: true } }, as('alice'));
    assert.equal(recalled.status, 200, JSON.stringify(recalled.body));
    assert.equal(recalled.body.session_id, sessionId);
    assert.match(recalled.body.output, new RegExp(`echo ${MARK}`), 'the resumed engine had the conversation made on node A');

    const read = await b!.request('POST', '/run', { prompt: 'run: cat notes.txt', engine: { session_id: sessionId, resume: true } }, as('alice'));
    assert.equal(read.status, 200, JSON.stringify(read.body));
    assert.match(read.body.output, new RegExp(MARK), 'the workspace made on node A is at the workdir on node B');

    const file = await b!.request('GET', `/workspaces/${workspaceId}/files/notes.txt`, undefined, as('alice'));
    assert.equal(file.status, 200);
    assert.equal(String(file.body).trim(), MARK);
  });

  test('node B: the planted link is restored as a link and no answer holds the host\'s /etc/shadow', async () => {
    const listing = await b!.request('GET', `/workspaces/${workspaceId}/files`, undefined, as('alice'));
    assert.equal(listing.status, 200, JSON.stringify(listing.body));
    const link = listing.body.entries.find((entry: { name: string }) => entry.name === 'shadow-link');
    assert.equal(link?.type, 'symlink', JSON.stringify(listing.body));

    const followed = await b!.request('GET', `/workspaces/${workspaceId}/files/shadow-link`, undefined, as('alice'));
    assert.notEqual(followed.status, 200, 'reading the link is refused');
    assert.ok(!String(JSON.stringify(followed.body)).includes(hostShadow.slice(0, 40)));

    const response = await fetch(`${b!.url}/workspaces/${workspaceId}/archive`, { headers: as('alice') });
    assert.equal(response.status, 200);
    const tar = gunzipSync(Buffer.from(await response.arrayBuffer())).toString('latin1');
    assert.ok(tar.includes('shadow-link') && tar.includes('/etc/shadow'), 'the archive has the link with its target text');
    assert.ok(!tar.includes(hostShadow.slice(0, 40)), "the archive does not hold the host's shadow file");
  });

  test("node B: caller 2 can neither read nor resume caller 1's session, nor read its workspace", async () => {
    for (const [method, path, body] of [
      ['GET', `/sessions/${sessionId}/messages`],
      ['POST', '/run', { prompt: 'recall:', engine: { session_id: sessionId, resume: true } }],
      ['POST', '/run', { prompt: 'recall:', engine: { session_id: sessionId, fork_session: true } }],
      ['GET', `/workspaces/${workspaceId}/files/notes.txt`],
      ['DELETE', `/sessions/${sessionId}`],
    ] as const) {
      const response = await b!.request(method, path, body, as('bob'));
      assert.equal(response.status, 404, `bob ${method} ${path}: ${JSON.stringify(response.body)}`);
    }
    assert.deepEqual((await b!.request('GET', '/sessions', undefined, as('bob'))).body.sessions, []);
    const continued = await b!.request('POST', '/run', { prompt: 'recall:', engine: { continue: true } }, as('bob'));
    assert.equal(continued.status, 200, JSON.stringify(continued.body));
    assert.notEqual(continued.body.session_id, sessionId);
    assert.doesNotMatch(continued.body.output, new RegExp(MARK));
  });
});
