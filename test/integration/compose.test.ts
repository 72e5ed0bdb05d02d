// Compose environments end to end: real Podman, a real Redis built offline from Debian's packages
// (scripts/build-test-images.sh), an agent service built from a Containerfile, the real engine talking to
// the offline model. The engine reaches the stack's services by name; a session's stack is reused by its
// later runs, a fork gets its own, and deleting the session, its TTL or a restart without its session
// removes every container, network and volume it had.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { stackResourcesOf, startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';

let project: string;

/** Every container, network and volume a Berth instance's stacks have, as "kind name". */
async function stackResources(t: TestBerth): Promise<string[]> {
  const { containers, networks, volumes } = await stackResourcesOf(t.config.instanceName);
  return [...containers.map((n) => `container ${n}`), ...networks.map((n) => `network ${n}`), ...volumes.map((n) => `volume ${n}`)];
}

/** Instances this file started (built images are found by their instance: other tests may be building too). */
const instances = new Set<string>();

/** Images the Berth instances of this file built for stacks (label berth.stack-instance). */
async function builtImages(): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const instance of instances) {
    const { stdout } = await exec('podman', ['images', '--filter', `label=berth.stack-instance=${instance}`, '--format', '{{.ID}}']);
    for (const id of stdout.split('\n').filter(Boolean)) ids.add(id);
  }
  return ids;
}

async function start(env: Record<string, string>): Promise<TestBerth> {
  const t = await startTestBerth(env);
  instances.add(t.config.instanceName);
  return t;
}

/** Writes a compose file (and optionally its .env) in its own directory of the project; answers its path. */
async function composeFile(name: string, document: unknown, env?: string): Promise<string> {
  const dir = join(project, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'compose.yaml'), typeof document === 'string' ? document : stringify(document));
  if (env !== undefined) await writeFile(join(dir, '.env'), env);
  return join(dir, 'compose.yaml');
}

/** The agent service (built FROM the Redis image, so it has redis-cli) and a Redis cache with a healthcheck. */
function redisStack(extra: Record<string, unknown> = {}) {
  return {
    services: {
      app: {
        build: { context: './agent' },
        environment: { CACHE_HOST: '${CACHE_HOST:-cache}' },
        depends_on: { cache: { condition: 'service_healthy' } },
        volumes: ['shared:/shared'],
        command: 'sleep infinity',
      },
      cache: {
        image: REDIS,
        healthcheck: { test: ['CMD', 'redis-cli', 'ping'], interval: '1s', retries: 30 },
        volumes: ['shared:/shared'],
      },
      ...extra,
    },
    volumes: { shared: {} },
  };
}

async function withAgentBuild(name: string, document: unknown, env?: string): Promise<string> {
  const path = await composeFile(name, document, env);
  await mkdir(join(project, name, 'agent'), { recursive: true });
  await writeFile(join(project, name, 'agent', 'Dockerfile'), `FROM ${REDIS}\nUSER root\nRUN echo built-by-berth > /built-marker\nUSER agent\n`);
  return path;
}

function environment(path: string, extra: Record<string, unknown> = {}) {
  return { type: 'compose', path, service: 'app', ...extra };
}

before(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-compose-'));
});
after(async () => {
  await rm(project, { recursive: true, force: true });
  // Built images go with their stacks (SERVICE_COMPOSE_REMOVE_BUILT_IMAGES); whatever a failure left, the suite removes.
  for (const id of await builtImages()) await exec('podman', ['rmi', '--force', id]).catch(() => undefined);
});

describe('a Redis stack', () => {
  let t: TestBerth;
  before(async () => {
    t = await start({ SERVICE_AGENT_ALLOWED_VOLUMES: project, SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s', SERVICE_COMPOSE_ALLOW_BUILD: 'true' });
  });
  after(async () => {
    await t?.stop();
  });

  it('the engine reaches the cache by service name; resume reuses the stack, fork gets its own, delete removes everything', async () => {
    const path = await withAgentBuild('redis', redisStack());
    const first = await t.request('POST', '/run', {
      prompt: 'run: redis-cli -h "$CACHE_HOST" ping && redis-cli -h cache set answer 42 && cat /built-marker && echo from-run-1 > /shared/note',
      container: { environment: environment(path) },
    });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.match(first.body.output, /PONG/);
    assert.match(first.body.output, /OK/);
    assert.match(first.body.output, /built-by-berth/);
    const sessionId: string = first.body.session_id;

    const listed = await t.request('GET', '/sessions');
    const entry = listed.body.sessions.find((s: { id: string }) => s.id === sessionId);
    assert.deepEqual(entry.stack.services, ['cache']);
    assert.equal(entry.stack.in_use, false);
    assert.equal((await t.request('GET', '/sessions')).status, 200);

    // The same stack: the value run 1 wrote into the cache is there, and so is its file on the stack's volume.
    const second = await t.request('POST', '/run', {
      prompt: 'run: redis-cli -h cache get answer && cat /shared/note',
      engine: { session_id: sessionId, resume: true },
      container: { environment: environment(path) },
    });
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.match(second.body.output, /42/);
    assert.match(second.body.output, /from-run-1/);

    const fork = await t.request('POST', '/run', {
      prompt: 'run: echo "[$(redis-cli -h cache get answer)]"',
      engine: { session_id: sessionId, fork_session: true },
      container: { environment: environment(path) },
    });
    assert.equal(fork.status, 200, JSON.stringify(fork.body));
    assert.notEqual(fork.body.session_id, sessionId);
    assert.match(fork.body.output, /\[\]/, 'a fork starts with a fresh stack');
    const networks = (await stackResources(t)).filter((r) => r.startsWith('network'));
    assert.equal(networks.length, 2, networks.join(', '));

    const metrics = await (await fetch(t.berth.metricsUrl)).text();
    assert.match(metrics, /berth_compose_stacks 2/);
    assert.match(metrics, /berth_run_phase_duration_seconds_count\{phase="compose_healthy"\} [1-9]/);
    assert.match(metrics, /berth_run_phase_duration_seconds_count\{phase="compose_build"\} [1-9]/);

    for (const id of [sessionId, fork.body.session_id]) {
      const deleted = await t.request('DELETE', `/sessions/${id}`);
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    }
    assert.deepEqual(await stackResources(t), []);
    assert.deepEqual(await t.leftovers(), []);
  });

  it('an ephemeral run (no_persistence) gets a stack for its own length only', async () => {
    const path = await withAgentBuild('ephemeral', redisStack());
    const response = await t.request('POST', '/run', {
      prompt: 'run: redis-cli -h cache ping',
      engine: { no_persistence: true },
      container: { environment: environment(path) },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.match(response.body.output, /PONG/);
    // Answered at its result, the run releases its stack right after.
    await t.berth.settled();
    assert.deepEqual(await stackResources(t), []);
  });

  it('refusals are 400s naming what is wrong, before any container, network or volume exists', async () => {
    const cases: [string, unknown, RegExp, Record<string, unknown>?][] = [
      ['privileged', redisStack({ evil: { image: REDIS, privileged: true } }), /services\.evil\.privileged is refused on this server \(SERVICE_COMPOSE_ALLOW_PRIVILEGED/],
      ['host-network', redisStack({ evil: { image: REDIS, network_mode: 'host' } }), /network_mode "host" is refused/],
      ['host-pid', redisStack({ evil: { image: REDIS, pid: 'host' } }), /pid "host" is refused/],
      ['cap-add', redisStack({ evil: { image: REDIS, cap_add: ['SYS_ADMIN'] } }), /cap_add \(SYS_ADMIN\) is refused/],
      ['devices', redisStack({ evil: { image: REDIS, devices: ['/dev/kmsg'] } }), /devices is refused/],
      ['seccomp', redisStack({ evil: { image: REDIS, security_opt: ['seccomp=unconfined'] } }), /weakens the sandbox/],
      ['host-volume', redisStack({ evil: { image: REDIS, volumes: ['/:/host'] } }), /bind mounts of host paths are refused/],
      ['unsupported', redisStack({ evil: { image: REDIS, ports: ['6379:6379'] } }), /services\.evil\.ports is not supported by Berth/],
      ['no-service', redisStack(), /service "nope" \(container.environment.service\) is not in the file/, { service: 'nope' }],
      ['bad-type', redisStack(), /environment/, { type: 'swarm' }],
      ['missing-image', redisStack({ ghost: { image: 'localhost/not-here:1' } }), /services\.ghost\.image "localhost\/not-here:1" is not present on this host/],
      ['schema', 'services:\n  app:\n    imag: x\n', /unknown key "imag"/],
      ['build-timeout-above-max', redisStack(), /build_timeout: "2h" is above this server's maximum of 15m/, { build_timeout: '2h' }],
    ];
    for (const [name, document, expected, extra] of cases) {
      const path = await withAgentBuild(`refused-${name}`, document);
      const response = await t.request('POST', '/run', { prompt: 'say: no', container: { environment: environment(path, extra) } });
      assert.equal(response.status, 400, `${name}: ${JSON.stringify(response.body)}`);
      assert.equal(response.body.status, 'error');
      assert.match(response.body.error, expected, name);
      assert.deepEqual(await stackResources(t), [], `${name} left resources`);
    }
    // The compose file itself must be under SERVICE_AGENT_ALLOWED_VOLUMES, and it is read without following links.
    const outside = await t.request('POST', '/run', { prompt: 'say: no', container: { environment: environment('/etc/passwd') } });
    assert.equal(outside.status, 400);
    assert.match(outside.body.error, /container\.environment\.path: host path "\/etc\/passwd" is not in SERVICE_AGENT_ALLOWED_VOLUMES/);
    await exec('ln', ['-s', '/etc/shadow', join(project, 'link.yaml')]);
    const linked = await t.request('POST', '/run', { prompt: 'say: no', container: { environment: environment(join(project, 'link.yaml')) } });
    assert.equal(linked.status, 400);
    assert.match(linked.body.error, /is not in SERVICE_AGENT_ALLOWED_VOLUMES/);
    const withImage = await t.request('POST', '/run', { prompt: 'say: no', container: { image: REDIS, environment: environment(join(project, 'refused-schema', 'compose.yaml')) } });
    assert.equal(withImage.status, 400);
    assert.match(withImage.body.error, /container\.image: cannot be combined with container\.environment/);
  });

  it('fuzz: generated compose files are refused with a 400 or run, never a 500 for a refusal, and refused ones create nothing', async () => {
    const dangerous = fc.constantFrom<Record<string, unknown>>(
      { privileged: true }, { network_mode: 'host' }, { ipc: 'host' }, { cap_add: ['NET_ADMIN'] }, { devices: ['/dev/null'] },
      { security_opt: ['apparmor=unconfined'] }, { volumes: ['./x:/x'] }, { ports: ['80'] }, { userns_mode: 'host' },
      { tty: true }, { networks: ['n'] }, { labels: { 'berth.stack': 'x' } }, { depends_on: ['app'] }, { depends_on: ['ghost'] },
      { healthcheck: { test: ['BOGUS'] } }, { mem_limit: 'lots' }, { restart: 'sometimes' }, { volumes: ['undeclared:/u'] },
      { command: 'a && b' }, { environment: { 'BAD NAME': 'x' } }, { image: '${NOPE:?unset}' }, { build: { context: '/etc' } },
    );
    let index = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(dangerous, { minLength: 1, maxLength: 3 }), fc.boolean(), async (traits, onAgent) => {
        const service = Object.assign({ image: REDIS }, ...traits) as Record<string, unknown>;
        const document = onAgent
          ? { services: { app: service, cache: { image: REDIS } } }
          : { services: { app: { image: REDIS }, side: service } };
        const path = await composeFile(`fuzz-${index++}`, document);
        const response = await t.request('POST', '/run', { prompt: 'say: fuzz', container: { environment: environment(path) } });
        assert.equal(response.status, 400, `${JSON.stringify(document)} → ${response.status} ${JSON.stringify(response.body)}`);
        assert.equal(response.body.status, 'error');
        assert.deepEqual(await stackResources(t), []);
      }),
      { numRuns: 60 },
    );
  });
});

describe('failures and expiry', () => {
  let t: TestBerth;
  before(async () => {
    t = await start({
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '6s',
      SERVICE_COMPOSE_STACK_TTL: '3s',
      SERVICE_COMPOSE_ALLOW_BUILD: 'true',
    });
  });
  after(async () => {
    await t?.stop();
  });

  it('a service that never becomes healthy fails the run within health_timeout, naming it with the end of its log', async () => {
    const path = await composeFile('unhealthy', {
      services: {
        app: { image: REDIS, depends_on: { db: { condition: 'service_healthy' } } },
        db: { image: REDIS, command: ['sh', '-c', 'echo starting the broken db; sleep 600'], healthcheck: { test: 'exit 1', interval: '1s' } },
      },
    });
    const started = Date.now();
    const response = await t.request('POST', '/run', { prompt: 'say: never', container: { environment: environment(path) } });
    const elapsed = Date.now() - started;
    assert.equal(response.status, 500, JSON.stringify(response.body));
    assert.match(response.body.error, /service "db" did not become healthy within 6s \(SERVICE_COMPOSE_HEALTH_TIMEOUT\)/);
    assert.match(response.body.error, /starting the broken db/);
    assert.ok(elapsed < 20_000, `took ${elapsed} ms`);
    assert.deepEqual(await stackResources(t), [], 'a failed bring-up leaves nothing');
  });

  it('a build over build_timeout fails naming the service, and its running step is stopped', async () => {
    const path = await composeFile('slow-build', { services: { app: { build: './agent' } } });
    await mkdir(join(project, 'slow-build', 'agent'), { recursive: true });
    await writeFile(join(project, 'slow-build', 'agent', 'Dockerfile'), `FROM ${REDIS}\nRUN sleep 600\n`);
    const response = await t.request('POST', '/run', { prompt: 'say: never', container: { environment: environment(path, { build_timeout: '3s' }) } });
    assert.equal(response.status, 500, JSON.stringify(response.body));
    assert.match(response.body.error, /the build of service "app" did not finish within 3s \(build_timeout\)/);
    const { stdout } = await exec('runc', ['list', '--quiet']);
    assert.deepEqual(stdout.split('\n').filter((id) => id.startsWith('buildah-')), [], 'no build step left running');
    const { stdout: sleeping } = await exec('pgrep', ['-fc', '^sleep 600$']).catch(() => ({ stdout: '0' }));
    assert.equal(sleeping.trim(), '0');
    assert.deepEqual(await stackResources(t), []);
  });

  it('a stack unused for SERVICE_COMPOSE_STACK_TTL is removed (its session stays)', async () => {
    const path = await withAgentBuild('ttl', redisStack());
    const imagesBefore = await builtImages();
    const response = await t.request('POST', '/run', { prompt: 'run: redis-cli -h cache ping', container: { environment: environment(path) } });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.notDeepEqual(await stackResources(t), []);
    const deadline = Date.now() + 15_000;
    while ((await stackResources(t)).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(await stackResources(t), []);
    const sessions = await t.request('GET', '/sessions');
    const entry = sessions.body.sessions.find((s: { id: string }) => s.id === response.body.session_id);
    assert.ok(entry, 'the session itself stays');
    assert.equal(entry.stack, undefined);
    // SERVICE_COMPOSE_REMOVE_BUILT_IMAGES (on by default): the built image went with the stack.
    const kept = [...(await builtImages())].filter((id) => !imagesBefore.has(id));
    assert.deepEqual(kept, []);
  });
});

describe('restarts', () => {
  it('a stop leaves a live session\'s stack running, the next start adopts it; a stack whose session is gone is removed', async () => {
    const state = await mkdtemp(join(tmpdir(), 'berth-compose-state-'));
    const env = {
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_COMPOSE_ALLOW_BUILD: 'true',
      SERVICE_INSTANCE_NAME: `compose-${Date.now().toString(36)}`,
      SERVICE_AGENT_SESSIONS_DIR: join(state, 'sessions'),
      SERVICE_DATA_DIR: join(state, 'data'),
    };
    const path = await withAgentBuild('restart', redisStack());
    let t = await start(env);
    try {
      const kept = await t.request('POST', '/run', { prompt: 'run: redis-cli -h cache set kept yes', container: { environment: environment(path) } });
      assert.equal(kept.status, 200, JSON.stringify(kept.body));
      const orphan = await t.request('POST', '/run', { prompt: 'run: redis-cli -h cache ping', container: { environment: environment(path) } });
      assert.equal(orphan.status, 200, JSON.stringify(orphan.body));
      await t.stop();
      assert.equal((await stackResources(t)).filter((r) => r.startsWith('network')).length, 2, 'stacks belong to sessions, not to the process');
      // The orphan's session disappears while Berth is down.
      await rm(join(state, 'sessions', orphan.body.session_id), { recursive: true, force: true });

      t = await start(env);
      const networks = (await stackResources(t)).filter((r) => r.startsWith('network'));
      assert.deepEqual(networks, [`network berth-stack-${kept.body.session_id}`]);
      const again = await t.request('POST', '/run', {
        prompt: 'run: redis-cli -h cache get kept',
        engine: { session_id: kept.body.session_id, resume: true },
        container: { environment: environment(path) },
      });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.match(again.body.output, /yes/, 'the adopted stack is the same one');
      assert.equal((await t.request('DELETE', `/sessions/${kept.body.session_id}`)).status, 200);
      assert.deepEqual(await stackResources(t), []);
    } finally {
      await t.stop();
      await rm(state, { recursive: true, force: true });
    }
  });
});
