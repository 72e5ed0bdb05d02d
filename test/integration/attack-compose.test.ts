// Issue 23, findings 1, 2 (built images) and 5, performed against a real Berth on real Podman with real
// builds: a caller's compose file tries to get host root through `build:` (bind and cache mounts out of
// the context, the host's network, a JSON-array or absolute dockerfile, a FROM outside the allowlist, a
// huge context), to use or see another stack's built image, and to hold more containers, memory and
// stacks than its limits. Each attempt is refused (400/429) before anything is created, or runs harmless:
// a build step is an unprivileged uid in a network namespace with nothing in it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { stackResourcesOf, startTestBerth, type TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';

let project: string;

before(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-attack-compose-'));
});
after(async () => {
  await rm(project, { recursive: true, force: true });
});

/** A compose file whose `app` service runs the engine in the Redis image and whose `side` service is built from `files`. */
async function buildProject(name: string, files: Record<string, string>, build: Record<string, unknown> = { context: './ctx' }): Promise<string> {
  const dir = join(project, name);
  await mkdir(join(dir, 'ctx'), { recursive: true });
  for (const [file, text] of Object.entries(files)) await writeFile(join(dir, 'ctx', file), text);
  await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { image: REDIS }, side: { build, command: ['sleep', 'infinity'] } } }));
  return join(dir, 'compose.yaml');
}

async function composeProject(name: string, document: unknown): Promise<string> {
  const dir = join(project, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'compose.yaml'), stringify(document));
  return join(dir, 'compose.yaml');
}

const environment = (path: string) => ({ type: 'compose', path, service: 'app' });

async function stackResources(t: TestBerth): Promise<string[]> {
  const { containers, networks, volumes } = await stackResourcesOf(t.config.instanceName);
  return [...containers, ...networks, ...volumes];
}

async function builtImagesOf(t: TestBerth): Promise<string[]> {
  const { stdout } = await exec('podman', ['images', '--filter', `label=berth.stack-instance=${t.config.instanceName}`, '--format', '{{.Repository}}:{{.Tag}}']);
  return stdout.split('\n').filter(Boolean);
}

/** What this Berth's builds leave on the host when they work as they should: nothing (other instances may be building). */
async function buildLeftovers(t: TestBerth): Promise<string[]> {
  const instance = t.config.instanceName;
  const processes = await exec('ps', ['-u', 'berth-build', '-o', 'pid=,args=']).then(({ stdout }) => stdout.split('\n'), () => []);
  const sandboxes = (await readdir(tmpdir())).filter((entry) => entry.startsWith(`berth-build-${instance}-`));
  return [...processes.filter((line) => line.includes(instance) || line.includes(`berth-build-${instance}-`)), ...sandboxes];
}

describe('compose builds, when the operator allows them', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth({
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_COMPOSE_ALLOW_BUILD: 'true',
      SERVICE_COMPOSE_MAX_CONTEXT_BYTES: '1m',
      SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'localhost/berth-test-*',
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
    });
  });
  after(async () => {
    for (const image of await builtImagesOf(t).catch(() => [])) await exec('podman', ['rmi', '--force', image]).catch(() => undefined);
    await t?.stop();
  });

  test('refused before Podman sees anything: mounts out of the context, URLs, foreign or absent images, a bad dockerfile, a huge context', async () => {
    const hostroot = await buildProject('bind', { Containerfile: `FROM ${REDIS}\nRUN --mount=type=bind,source=hostroot,target=/h,rw cat /h/etc/shadow && touch /h/tmp/owned-by-build\n` }, { context: './ctx', dockerfile: 'Containerfile' });
    await symlink('/', join(project, 'bind', 'ctx', 'hostroot'));
    const cases: [string, string, RegExp][] = [
      ['bind mount through hostroot -> /', hostroot, /services\.side\.build\.dockerfile "Containerfile": line 2 \(RUN\): RUN --mount is refused/],
      ['cache id out of the cache directory', await buildProject('cache', { Dockerfile: `FROM ${REDIS}\nRUN --mount=type=cache,id=../../../../../../../../../..,target=/h cat /h/etc/shadow\n` }), /RUN --mount is refused/],
      ['ADD of Berth\'s own API', await buildProject('add-url', { Dockerfile: `FROM ${REDIS}\nADD http://127.0.0.1:8080/health /h\n` }), /ADD of a URL is refused/],
      ['FROM outside the allowlist', await buildProject('foreign', { Dockerfile: 'FROM docker.io/library/debian:12\nRUN true\n' }), /"docker\.io\/library\/debian:12" is not allowed: it matches no pattern of SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS/],
      ['FROM an absent image (no pull)', await buildProject('absent', { Dockerfile: 'ARG V=9\nFROM localhost/berth-test-absent:${V}\n' }), /"localhost\/berth-test-absent:9" is not present on this host; builds never pull/],
      ['dockerfile as a JSON array', await buildProject('json', {}, { context: './ctx', dockerfile: '["/etc/hostname"]' }), /build\.dockerfile: "\["\/etc\/hostname"\]" must be a relative path inside the build context/],
      ['dockerfile as an absolute path', await buildProject('absolute', {}, { context: './ctx', dockerfile: '/etc/hostname' }), /build\.dockerfile: "\/etc\/hostname" must be a relative path/],
      ['dockerfile as a link out of the context', await buildProject('linked', {}, { context: './ctx', dockerfile: 'Dockerfile' }), /dockerfile "Dockerfile" is not a file in the build context/],
      ['a context over SERVICE_COMPOSE_MAX_CONTEXT_BYTES', await buildProject('huge', { Dockerfile: `FROM ${REDIS}\n`, 'blob.bin': 'x'.repeat(2 * 1024 * 1024) }), /build\.context: the build context holds more than 1048576 bytes of files \(SERVICE_COMPOSE_MAX_CONTEXT_BYTES/],
    ];
    await symlink('/etc/hostname', join(project, 'linked', 'ctx', 'Dockerfile'));
    const { stdout: eventsBefore } = await exec('podman', ['images', '-q', '--filter', 'reference=*debian*']);
    for (const [name, path, expected] of cases) {
      const response = await t.request('POST', '/run', { prompt: 'say: never', container: { environment: environment(path) } });
      assert.equal(response.status, 400, `${name}: ${JSON.stringify(response.body)}`);
      assert.match(response.body.error, expected, name);
      assert.deepEqual(await stackResources(t), [], `${name} left stack resources`);
    }
    assert.equal((await exec('podman', ['images', '-q', '--filter', 'reference=*debian*'])).stdout, eventsBefore, 'nothing was pulled');
    await assert.rejects(exec('test', ['-e', '/tmp/owned-by-build']));
    assert.deepEqual(await builtImagesOf(t), []);
    assert.deepEqual(await buildLeftovers(t), []);
  });

  test('a RUN step is an unprivileged uid with no network (neither Berth nor the gateway); the built image is its session\'s: unlisted, refused as a run image, removed with the stack', async () => {
    const port = new URL(t.url).port;
    // Berth's model gateway and egress proxy, where engine containers get out.
    const gateway = new URL(t.berth.gateway.url);
    const probe = [
      'uid0=$(awk \'$1 == 0 {print $2}\' /proc/self/uid_map)',
      `berth=$(bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null && echo reached || echo no)`,
      `gateway=$(bash -c 'exec 3<>/dev/tcp/${gateway.hostname}/${gateway.port}' 2>/dev/null && echo reached || echo no)`,
      'routes=$(tail -n +2 /proc/net/route | wc -l)',
      'limited=$(grep -cE "^[0-9]+:(memory|pids|cpu):.*/berth-build-" /proc/self/cgroup)',
      'mkdir /built && echo "uid0=$uid0 berth=$berth gateway=$gateway routes=$routes limited=$limited" > /built/probe',
    ].join('; ');
    const path = await buildProject('benign', { Dockerfile: `FROM ${REDIS}\nUSER root\nRUN ${probe}\n` });
    const run = await t.request('POST', '/run', { prompt: 'say: with a built sidecar', container: { environment: environment(path) } });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const [built] = await builtImagesOf(t);
    assert.match(built ?? '', /^localhost\/berth-build-side:[0-9a-f]{16}-/);
    const { stdout: report } = await exec('podman', ['run', '--rm', '--user', 'root', built!, 'sh', '-c', 'cat /built/probe; stat -c owner=%u /built/probe']);
    const match = /uid0=(\d+) berth=(\w+) gateway=(\w+) routes=(\d+) limited=(\d+)\nowner=(\d+)/.exec(report);
    assert.ok(match, report);
    assert.notEqual(match[1], '0', 'root in the step is not host root');
    assert.equal(match[2], 'no', 'Berth\'s port on 127.0.0.1 of the host is not reachable');
    assert.equal(match[3], 'no', 'the gateway is not reachable');
    assert.equal(match[4], '0', 'the step has no route at all');
    assert.equal(match[5], '3', 'the step is in the build\'s memory, pids and CPU cgroups');
    assert.equal(match[6], '0', 'the image keeps container ids (the build\'s namespace mapped back)');

    const listed = await t.request('GET', '/images');
    assert.equal(listed.status, 200);
    assert.ok(!JSON.stringify(listed.body).includes('berth-build'), 'GET /images does not list built images');
    assert.equal((await t.request('GET', `/images/${encodeURIComponent(built!)}`)).status, 404);
    const reuse = await t.request('POST', '/run', { prompt: 'say: steal', container: { image: built } });
    assert.equal(reuse.status, 400, JSON.stringify(reuse.body));
    assert.match(reuse.body.error, /container\.image: ".*" is an image Berth built for a compose stack/);
    const asSidecar = await composeProject('reuse', { services: { app: { image: REDIS }, thief: { image: built } } });
    const sidecar = await t.request('POST', '/run', { prompt: 'say: steal', container: { environment: environment(asSidecar) } });
    assert.equal(sidecar.status, 400, JSON.stringify(sidecar.body));

    assert.equal((await t.request('DELETE', `/sessions/${run.body.session_id}`)).status, 200);
    assert.deepEqual(await stackResources(t), []);
    assert.deepEqual(await builtImagesOf(t), [], 'SERVICE_COMPOSE_REMOVE_BUILT_IMAGES is on by default');
    assert.deepEqual(await t.leftovers(), []);
    assert.deepEqual(await buildLeftovers(t), []);
  });
});

describe('compose limits', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], {
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_MAX_CONTAINERS_PER_CALLER: '2',
      SERVICE_AGENT_MAX_MEMORY: '1g',
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
    }));
  });
  after(async () => {
    await t?.stop();
  });

  const run = (who: 'alice' | 'bob', path: string) =>
    t.request('POST', '/run', { prompt: 'say: hi', container: { environment: environment(path) } }, as(who));

  test('build: is off by default; mem_limit above the maximum is a 400 naming the service and key', async () => {
    const build = await buildProject('off', { Dockerfile: `FROM ${REDIS}\n` });
    const refused = await run('alice', build);
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(refused.body.error, /services\.side\.build is refused on this server \(SERVICE_COMPOSE_ALLOW_BUILD is false\)/);
    const memory = await composeProject('memory', { services: { app: { image: REDIS }, cache: { image: REDIS, mem_limit: '64g' } } });
    const big = await run('alice', memory);
    assert.equal(big.status, 400, JSON.stringify(big.body));
    assert.match(big.body.error, /services\.cache\.mem_limit: "64g" is above this server's maximum .*SERVICE_AGENT_MAX_MEMORY/);
    assert.deepEqual(await stackResources(t), []);
  });

  test('sidecars count against the caller\'s containers: a stack that does not fit is a 429 and leaves nothing', async () => {
    const sidecars = await composeProject('sidecars', { services: { app: { image: REDIS }, one: { image: REDIS }, two: { image: REDIS } } });
    const refused = await run('alice', sidecars);
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.match(refused.body.error, /SERVICE_MAX_CONTAINERS_PER_CALLER/);
    assert.deepEqual(await stackResources(t), []);
    assert.deepEqual(await t.leftovers(), []);
    // The slots the refused stack reserved were given back: the caller's next run fits.
    const plain = await t.request('POST', '/run', { prompt: 'say: still room' }, as('alice'));
    assert.equal(plain.status, 200, JSON.stringify(plain.body));
  });

  test('a third stack of one caller is a 429 (SERVICE_COMPOSE_MAX_STACKS_PER_CALLER); another caller still gets one', async () => {
    const agentOnly = await composeProject('agent-only', { services: { app: { image: REDIS } } });
    const sessions: [('alice' | 'bob'), string][] = [];
    for (let i = 0; i < 2; i++) {
      const ok = await run('alice', agentOnly);
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      sessions.push(['alice', ok.body.session_id]);
    }
    const third = await run('alice', agentOnly);
    assert.equal(third.status, 429, JSON.stringify(third.body));
    assert.match(third.body.error, /SERVICE_COMPOSE_MAX_STACKS_PER_CALLER/);
    const bob = await run('bob', agentOnly);
    assert.equal(bob.status, 200, JSON.stringify(bob.body));
    sessions.push(['bob', bob.body.session_id]);
    assert.equal((await stackResources(t)).length, 3, 'three stack networks, no more');
    for (const [who, id] of sessions) assert.equal((await t.request('DELETE', `/sessions/${id}`, undefined, as(who))).status, 200);
    assert.deepEqual(await stackResources(t), []);
    assert.deepEqual(await t.leftovers(), []);
  });
});
