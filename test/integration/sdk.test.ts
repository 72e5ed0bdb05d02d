// @berth/client against real Berths (real Podman, the offline model): every endpoint family through the
// SDK, streams and agents included; token exchange, refresh and logout on a server with authentication;
// retries on a rate-limited server; and the committed OpenAPI snapshot and generated types kept current.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { createServer, connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Berth, BerthError, MemoryTokenStore, type AgentEvent, type PullProgress, type Tokens } from '../../packages/client/src/index.js';
import { PACKAGE_DIR, REGENERATE_COMMAND, SNAPSHOT_PATH, TYPES_PATH, snapshotText, typesText } from '../../packages/client/scripts/openapi-types.js';
import { metric, startTestBerth, type TestBerth } from '../support/berth.js';
import { podman, startTestRegistry, type TestRegistry } from '../support/registry.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const AGENT_IMAGE = 'localhost/berth-agent:0.1.0-alpha';
const MUSL_IMAGE = 'localhost/berth-test-musl:latest';
const CLIENT_ID = 'sdk-test';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const exec = promisify(execFile);

/** Every file under `dir` with its text, by path relative to `dir`. */
async function tree(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = await readFile(path, 'utf8');
  }
  return files;
}

/** The name the API token has in SERVICE_API_TOKENS: the `sub` of every token the SDK gets with it. */
const API_TOKEN_NAME = 'sdk-user';

/** Authentication on, as `make up` runs Berth. */
function authEnvironment(apiToken: string): Record<string, string> {
  return { SERVICE_AUTH_ENABLED: 'true', SERVICE_JWT_SECRET: hex(32), SERVICE_API_TOKENS: `${API_TOKEN_NAME}:${apiToken}` };
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`${what} within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** A TokenStore that remembers every pair saved to it. */
class RecordingStore extends MemoryTokenStore {
  readonly saved: (Tokens | undefined)[] = [];

  override save(tokens: Tokens | undefined): void {
    this.saved.push(tokens);
    super.save(tokens);
  }
}

/**
 * A TCP proxy in front of Berth whose connections a test can cut, as a network failure or a restarted
 * load balancer would: the client sees its stream break off, Berth sees its client leave.
 */
async function startCuttableProxy(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('proxy has no address');
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${address.port}`,
    cut,
    stop: async () => {
      cut();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('the SDK against a Berth with authentication', () => {
  const apiToken = hex(24);
  let t: TestBerth;
  let registry: TestRegistry;
  let berth: Berth;
  const pulled: string[] = [];

  before(async () => {
    registry = await startTestRegistry();
    await registry.push(MUSL_IMAGE, 'allowed/sdk-musl:1');
    t = await startTestBerth({
      ...authEnvironment(apiToken),
      SERVICE_AGENT_IMAGE: AGENT_IMAGE,
      SERVICE_IMAGE_INSECURE_REGISTRIES: registry.host,
      SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: `localhost/*,${registry.host}/allowed/*`,
    });
    berth = new Berth({ url: t.url, apiToken, clientId: CLIENT_ID });
  });

  after(async () => {
    for (const reference of pulled) await podman('rmi', reference).catch(() => undefined);
    await t?.stop();
    await registry?.stop();
  });

  describe('runs', () => {
    it('run() answers the output, a session_id and the usage', async () => {
      const result = await berth.run({ prompt: 'say: hi' });
      assert.equal(result.status, 'completed');
      assert.equal(result.output, 'hi');
      assert.match(result.session_id, UUID);
      assert.match(result.id, /^run-/);
      assert.ok(result.usage && result.usage.token_usage.output_tokens > 0, JSON.stringify(result.usage));
    });

    it('stream() yields the output frames in order, then done with the session_id', async () => {
      const frames = await collect(berth.stream({ prompt: 'slow: 50' }));
      const outputs = frames.filter((f) => f.type === 'output');
      const last = frames.at(-1);
      assert.ok(outputs.length >= 2, `${outputs.length} output frames`);
      assert.equal(last?.type, 'done');
      assert.ok(last?.type === 'done' && UUID.test(last.session_id) && last.id.startsWith('run-'));
      const sessionId = last.type === 'done' ? last.session_id : '';
      const messages = await collect(berth.sessions.allMessages(sessionId));
      const answer = messages.find((m) => m.role === 'assistant');
      assert.equal(outputs.map((f) => (f.type === 'output' ? f.content : '')).join(''), answer?.content);
    });

    it('aborting a stream mid-run stops the run and leaves no container', async () => {
      const controller = new AbortController();
      const seen: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const frame of berth.stream({ prompt: 'slow: 3000' }, { signal: controller.signal })) {
            seen.push(frame.type);
            if (frame.type === 'output') controller.abort();
          }
        })(),
        { name: 'AbortError' },
      );
      assert.deepEqual(seen, ['output']);
      await eventually('the aborted run\'s container is removed', async () => (await t.leftovers()).length === 0);
    });
  });

  describe('jobs', () => {
    it('runAsync() + waitForJob() answer the completed job with its output', async () => {
      const { job_id, session_id } = await berth.runAsync({ prompt: 'say: from a job' });
      assert.match(job_id, /^job-/);
      assert.match(session_id, UUID);
      const updates: string[] = [];
      const job = await berth.waitForJob(job_id, { interval: 100, onUpdate: (j) => updates.push(j.status) });
      assert.equal(job.status, 'completed');
      assert.equal(job.output, 'from a job');
      assert.equal(job.session_id, session_id);
      assert.equal(updates.at(-1), 'completed');
    });

    it('waitForJob() answers a job cancelled while it waits, and cancel() says cancelled', async () => {
      const { job_id } = await berth.runAsync({ prompt: 'sleep: 20000' });
      const waiting = berth.waitForJob(job_id, { interval: 100 });
      await eventually('the job runs', async () => (await berth.jobs.get(job_id)).status === 'running');
      assert.deepEqual(await berth.jobs.cancel(job_id), { id: job_id, status: 'cancelled' });
      const job = await waiting;
      assert.equal(job.status, 'cancelled');
      await eventually('the cancelled job\'s container is removed', async () => (await t.leftovers()).length === 0);
    });

    it('an aborted waitForJob() rejects with AbortError and leaves the job alone', async () => {
      const { job_id } = await berth.runAsync({ prompt: 'sleep: 20000' });
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 300);
      await assert.rejects(berth.waitForJob(job_id, { interval: 50, signal: controller.signal }), { name: 'AbortError' });
      assert.ok(['pending', 'running'].includes((await berth.jobs.get(job_id)).status));
      await berth.jobs.cancel(job_id);
      await eventually('the job\'s container is removed', async () => (await t.leftovers()).length === 0);
    });

    it('list() pages, all() walks every page, get() reads one, cancel() of a finished job is a 409', async () => {
      const created: string[] = [];
      for (const n of [1, 2, 3]) created.push((await berth.runAsync({ prompt: `say: page ${n}` })).job_id);
      for (const id of created) await berth.waitForJob(id, { interval: 100 });

      const page = await berth.jobs.list({ status: 'completed', limit: 2 });
      assert.equal(page.jobs.length, 2);
      const everyCompleted = await collect(berth.jobs.all({ status: 'completed', limit: 2 }));
      const ids = everyCompleted.map((j) => j.id);
      assert.equal(new Set(ids).size, ids.length);
      for (const id of created) assert.ok(ids.includes(id), `${id} in ${ids.join(', ')}`);
      assert.ok(everyCompleted.every((j) => j.status === 'completed'));
      assert.deepEqual(ids.slice(0, 3), [...created].reverse(), 'newest first');

      const job = await berth.jobs.get(created[0]!);
      assert.equal(job.output, 'page 1');
      await assert.rejects(berth.jobs.cancel(created[0]!), (error: BerthError) => {
        assert.ok(error instanceof BerthError);
        assert.equal(error.status, 409);
        assert.equal(error.error, `job ${created[0]} is already completed and cannot be cancelled`);
        return true;
      });
    });
  });

  describe('sessions', () => {
    it('list/all, messages pages, allMessages, message, and delete (then 404)', async () => {
      const first = await berth.run({ prompt: 'say: one' });
      const second = await berth.run({ prompt: 'say: two', engine: { session_id: first.session_id, resume: true } });
      assert.equal(second.session_id, first.session_id);

      const listed = await berth.sessions.list();
      assert.ok(listed.sessions.some((s) => s.id === first.session_id && s.title === 'say: one'), JSON.stringify(listed));
      assert.ok((await collect(berth.sessions.all())).some((s) => s.id === first.session_id));

      const page = await berth.sessions.messages(first.session_id, { limit: 1 });
      assert.deepEqual([page.messages.length, page.total, page.limit, page.offset, page.has_more], [1, 4, 1, 0, true]);
      const all = await collect(berth.sessions.allMessages(first.session_id, { limit: 1 }));
      assert.deepEqual(
        all.map((m) => [m.role, m.content]),
        [
          ['user', 'say: one'],
          ['assistant', 'one'],
          ['user', 'say: two'],
          ['assistant', 'two'],
        ],
      );
      assert.deepEqual(await berth.sessions.message(first.session_id, all[3]!.id), all[3]);

      assert.deepEqual(await berth.sessions.delete(first.session_id), { success: true, session_id: first.session_id });
      await assert.rejects(berth.sessions.messages(first.session_id), (error: BerthError) => {
        assert.ok(error instanceof BerthError);
        assert.equal(error.status, 404);
        assert.equal(error.error, `session ${first.session_id} not found`);
        return true;
      });
    });
  });

  describe('agents', () => {
    async function idle(id: string) {
      await eventually(`agent ${id} is idle`, async () => (await berth.agents.get(id)).status === 'idle');
    }

    /** Follows an agent's events in the background; `connected()` resolves once the stream is open. */
    function follow(client: Berth, id: string, signal: AbortSignal) {
      const events: AgentEvent[] = [];
      let connections = 0;
      let reconnects = 0;
      const done = (async () => {
        for await (const event of client.agents.events(id, { signal, onConnect: () => connections++, onReconnect: () => reconnects++ })) events.push(event);
      })();
      return {
        events,
        done,
        connections: () => connections,
        reconnects: () => reconnects,
        turn: (turnId: string) => events.filter((e) => e.turn_id === turnId).map((e) => e.type),
      };
    }

    it('spawn, send, events (turn_start, output, turn_end), list, get and delete', async () => {
      const agent = await berth.agents.spawn({ idle_timeout_seconds: 120 });
      assert.match(agent.id, /^agent-/);
      const controller = new AbortController();
      const following = follow(berth, agent.id, controller.signal);
      try {
        await idle(agent.id);
        await eventually('the event stream is open', async () => following.connections() === 1);
        const { turn_id } = await berth.agents.send(agent.id, 'say: agent hi');
        assert.match(turn_id, /^turn-/);
        await eventually('the turn ends', async () => following.turn(turn_id).includes('turn_end'));
        const turn = following.turn(turn_id);
        assert.equal(turn[0], 'turn_start');
        assert.equal(turn.at(-1), 'turn_end');
        assert.ok(turn.includes('output'));
        const outputs = following.events.filter((e) => e.turn_id === turn_id && e.type === 'output').map((e) => e.content ?? '');
        assert.ok(outputs.some((line) => line.includes('agent hi')), outputs.join('\n'));

        assert.ok((await berth.agents.list()).agents.some((a) => a.id === agent.id));
        assert.equal((await berth.agents.get(agent.id)).turns_completed, 1);
      } finally {
        await berth.agents.delete(agent.id);
      }
      // Deleting the agent ends the stream with `exited`: the iteration finishes by itself.
      await following.done;
      assert.equal(following.events.at(-1)?.type, 'exited');
      assert.equal((await berth.agents.get(agent.id)).status, 'exited');
      assert.deepEqual(await t.leftovers(), []);
    });

    it('events() reconnects after the connection is cut and delivers the next turn', async () => {
      const proxy = await startCuttableProxy(t.url);
      const throughProxy = new Berth({ url: proxy.url, apiToken, clientId: CLIENT_ID });
      const agent = await berth.agents.spawn({ idle_timeout_seconds: 120 });
      const controller = new AbortController();
      const following = follow(throughProxy, agent.id, controller.signal);
      try {
        await idle(agent.id);
        await eventually('the event stream is open', async () => following.connections() === 1);
        proxy.cut();
        await eventually('the stream is open again', async () => following.reconnects() >= 1 && following.connections() >= 2);
        const { turn_id } = await berth.agents.send(agent.id, 'say: after the cut');
        await eventually('the new turn arrives on the reconnected stream', async () => following.turn(turn_id).includes('turn_end'));
        assert.deepEqual(following.turn(turn_id).filter((type) => type !== 'output'), ['turn_start', 'turn_end']);
      } finally {
        controller.abort();
        await following.done.catch((error: Error) => assert.equal(error.name, 'AbortError'));
        await berth.agents.delete(agent.id);
        await proxy.stop();
      }
      assert.deepEqual(await t.leftovers(), []);
    });
  });

  describe('images', () => {
    it('list() ranks the agent image first; get() reads it by reference', async () => {
      const { images } = await berth.images.list();
      const agent = images.find((i) => `${i.repository}:${i.tag}` === AGENT_IMAGE);
      assert.deepEqual([agent?.compatibility_rank, agent?.compatible, agent?.allowed], [1, true, true]);
      assert.equal(images[0]?.compatibility_rank, 1);
      const one = await berth.images.get(AGENT_IMAGE);
      assert.deepEqual(one, agent);
      await assert.rejects(berth.images.get('localhost/no-such-image:1'), { name: 'BerthError', status: 404, error: 'image "localhost/no-such-image:1" not found' });
    });

    it('search() finds an image in a registry; pull() reports Podman\'s progress and answers the image', async () => {
      const { results } = await berth.images.search(`${registry.host}/allowed`);
      const reference = `${registry.host}/allowed/sdk-musl`;
      assert.ok(results.some((r) => r.name === reference), JSON.stringify(results));

      const progress: PullProgress[] = [];
      pulled.push(`${reference}:1`);
      const result = await berth.images.pull(`${reference}:1`, { onProgress: (p) => progress.push(p) });
      assert.equal(result.success, true);
      assert.equal(result.image, `${reference}:1`);
      assert.deepEqual([progress[0]?.phase, progress.at(-1)?.phase], ['started', 'done']);
      assert.deepEqual(progress.at(-1), { phase: 'done', image: `${reference}:1`, elapsed_ms: progress.at(-1)!.elapsed_ms, result });
      const copying = progress.find((p) => p.phase === 'progress' && /^Copying blob sha256:[0-9a-f]{64}$/.test(p.message));
      assert.ok(copying?.phase === 'progress' && copying.blobs_started >= 1, JSON.stringify(progress));
      assert.equal((await berth.images.get(`${reference}:1`)).id, result.image_id);
      // Without onProgress the JSON answer: the same image.
      assert.deepEqual(await berth.images.pull(`${reference}:1`), result);
    });

    it('pull() of an image the registry does not have rejects with the same BerthError with or without onProgress', async () => {
      const image = `${registry.host}/allowed/sdk-nothing:1`;
      const plain = await berth.images.pull(image).then(() => assert.fail('pulled'), (error: unknown) => error as BerthError);
      assert.equal(plain.status, 404);
      const phases: string[] = [];
      await assert.rejects(berth.images.pull(image, { onProgress: (p) => phases.push(p.phase) }), { name: 'BerthError', status: 404, error: plain.error });
      assert.equal(phases[0], 'started');
      assert.ok(!phases.includes('done'));
    });
  });

  describe('system', () => {
    it('health, version, claudeStatus and secrets', async () => {
      const health = await berth.health();
      assert.equal(health.status, 'ok');
      assert.equal(health.name, 'berth');
      const version = await berth.version();
      assert.equal(version.api_version, '1');
      assert.equal(version.version, health.version);
      assert.equal((await berth.claudeStatus()).configured, true);
      const { secrets } = await berth.secrets();
      assert.ok(Array.isArray(secrets) && secrets.every((name) => !name.startsWith('berth-')), secrets.join());
    });
  });

  describe('auth', () => {
    it('token() exchanges an API token and keeps the pair; validate() names the API token, whatever the client_id', async () => {
      const store = new RecordingStore();
      const client = new Berth({ url: t.url, tokens: store });
      const pair = await client.auth.token(apiToken, 'sdk-login');
      assert.equal(pair.token_type, 'Bearer');
      assert.equal(store.load()?.access_token, pair.access_token);
      assert.equal(store.load()?.refresh_token, pair.refresh_token);
      assert.ok(Math.abs(store.load()!.expires_at! - (Date.now() + pair.expires_in * 1000)) < 5000);
      const { valid, claims } = await client.auth.validate();
      assert.equal(valid, true);
      assert.equal(claims.sub, API_TOKEN_NAME);
    });

    it('a wrong API token is a 401 BerthError', async () => {
      const client = new Berth({ url: t.url, apiToken: hex(24) });
      await assert.rejects(client.secrets(), { name: 'BerthError', status: 401, error: 'invalid token' });
    });

    it('logout() revokes both tokens and empties the store', async () => {
      const store = new RecordingStore();
      const client = new Berth({ url: t.url, tokens: store });
      const pair = await client.auth.token(apiToken, 'sdk-logout');
      assert.deepEqual(await client.auth.logout(), { success: true });
      assert.equal(store.load(), undefined);
      const revoked = new Berth({ url: t.url, accessToken: pair.access_token });
      await assert.rejects(revoked.auth.validate(), { name: 'BerthError', status: 401, error: 'token blacklisted' });
      const refresh = await t.request('POST', '/auth/refresh', { refresh_token: pair.refresh_token });
      assert.equal(refresh.status, 401);
    });
  });

  describe('errors', () => {
    it('a 400 carries the server text naming the field', async () => {
      await assert.rejects(berth.run({ prompt: 'say: x', engine: { max_turns: 'five' as unknown as number } }), (error: BerthError) => {
        assert.ok(error instanceof BerthError);
        assert.equal(error.status, 400);
        assert.equal(error.error, 'engine.max_turns must be of type integer');
        assert.deepEqual(error.body, { error: 'engine.max_turns must be of type integer', status: 'error' });
        return true;
      });
    });

    it('a 404 carries the server text', async () => {
      const id = 'job-00000000-0000-4000-8000-000000000000';
      await assert.rejects(berth.jobs.get(id), { name: 'BerthError', status: 404, error: `job ${id} not found` });
    });
  });

  describe('generated types', () => {
    it('the committed OpenAPI snapshot and types are what the served document generates', async () => {
      const document = await (await fetch(`${t.url}/swagger/doc.json`)).json();
      const stale = `packages/client is stale; regenerate: ${REGENERATE_COMMAND}`;
      assert.equal(await readFile(SNAPSHOT_PATH, 'utf8'), snapshotText(document), stale);
      assert.equal(await readFile(TYPES_PATH, 'utf8'), await typesText(document), stale);
    });

    it('the committed API reference (docs/sdk) is what TypeDoc renders from the SDK\'s types', async () => {
      const out = await mkdtemp(join(tmpdir(), 'sdk-reference-'));
      try {
        await exec(process.execPath, [join(PACKAGE_DIR, '..', '..', 'node_modules', 'typedoc', 'bin', 'typedoc'), '--options', 'typedoc.json', '--out', out], { cwd: PACKAGE_DIR });
        const committed = await tree(join(PACKAGE_DIR, '..', '..', 'docs', 'sdk'));
        assert.deepEqual(committed, await tree(out), 'docs/sdk is stale; regenerate: npm run docs -w @berth/client');
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    });
  });
});

describe('the SDK renewing short-lived tokens', () => {
  const apiToken = hex(24);
  const LIFETIME_MS = 2000;
  let t: TestBerth;

  before(async () => {
    t = await startTestBerth({ ...authEnvironment(apiToken), SERVICE_JWT_EXPIRY: '2s' });
  });
  after(async () => {
    await t?.stop();
  });

  it('a call after the access token expired succeeds, and the rotated pair is saved', async () => {
    const store = new RecordingStore();
    const client = new Berth({ url: t.url, apiToken, tokens: store, clientId: 'sdk-refresh' });
    await client.secrets();
    const first = store.load()!;
    await sleep(LIFETIME_MS + 1000);
    assert.equal((await t.request('GET', '/secrets', undefined, { authorization: `Bearer ${first.access_token}` })).status, 401, 'the first token has expired');
    await client.secrets();
    const second = store.load()!;
    assert.notEqual(second.refresh_token, first.refresh_token);
    assert.notEqual(second.access_token, first.access_token);
    assert.equal((await client.auth.validate()).claims.sub, API_TOKEN_NAME);
  });

  it('a 401 for an expired token refreshes with the stored refresh token, with no API token at hand', async () => {
    const exchanged = (await t.request('POST', '/auth/token', { client_id: 'sdk-cli' }, { authorization: `Bearer ${apiToken}` })).body;
    // Stored without an expiry, as a tool that only kept the tokens would: only the server's 401 tells.
    const store = new RecordingStore({ access_token: exchanged.access_token, refresh_token: exchanged.refresh_token });
    const client = new Berth({ url: t.url, tokens: store });
    await sleep(LIFETIME_MS + 1000);
    const { secrets } = await client.secrets();
    assert.ok(Array.isArray(secrets));
    assert.equal(store.saved.length, 1);
    assert.notEqual(store.load()!.refresh_token, exchanged.refresh_token);
    // The refresh token used is single-use: the server refuses it now.
    assert.equal((await t.request('POST', '/auth/refresh', { refresh_token: exchanged.refresh_token })).status, 401);
  });
});

describe('the SDK on a rate-limited Berth', () => {
  let t: TestBerth;

  before(async () => {
    t = await startTestBerth({ SERVICE_RATE_LIMIT_ENABLED: 'true', SERVICE_RATE_LIMIT_RPS: '1', SERVICE_RATE_LIMIT_BURST: '2' });
  });
  after(async () => {
    await t?.stop();
  });

  const refill = () => sleep(2500);

  it('raw requests in a burst get 429 with Retry-After', async () => {
    await refill();
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => fetch(`${t.url}/health`)));
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length >= 2, answers.map((a) => a.status).join());
    assert.ok(refused.every((a) => Number(a.headers.get('retry-after')) >= 1));
    const body = (await refused[0]!.json()) as { error: string };
    assert.equal(body.error, 'rate limit exceeded; slow down and retry later');
  });

  it('the same burst through the SDK succeeds: refused calls wait and are sent again', async () => {
    await refill();
    const berth = new Berth({ url: t.url });
    const calls = [berth.health(), berth.version(), berth.jobs.list(), berth.sessions.list(), berth.agents.list()];
    const answers = await Promise.all(calls);
    assert.equal(answers.length, 5);
    assert.equal((answers[0] as { status: string }).status, 'ok');
  });

  it('sequential calls wait when X-RateLimit-Remaining says 0 instead of being refused', async () => {
    await refill();
    const before = await metric(t, 'berth_rate_limited_total');
    const berth = new Berth({ url: t.url });
    for (let i = 0; i < 5; i++) await berth.health();
    assert.equal(await metric(t, 'berth_rate_limited_total'), before, 'no request was refused');
  });
});
