// SERVICE_COMPOSE_BUILD_USER (issue 28): a rootful Berth runs compose builds under the rootless Podman of
// this user, creating it (a system user with a subordinate id range) when missing. A real build of the
// agent service records, in its RUN step, the uid map its processes had; the run then reads that record
// in the built image: build root was the configured user, never host root. The user this test made is
// removed again (with its subordinate ranges).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { stackResourcesOf, startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';
const user = `berth-bt-${randomBytes(3).toString('hex')}`;

let project: string;
let t: TestBerth;

async function userExists(): Promise<boolean> {
  return exec('id', ['-u', user]).then(() => true, () => false);
}

before(async () => {
  assert.equal(await userExists(), false, 'the build user does not exist before');
  project = await mkdtemp(join(tmpdir(), 'berth-build-user-'));
  t = await startTestBerth({
    SERVICE_POOL_SIZE: '0',
    SERVICE_AGENT_POOL_SIZE: '0',
    SERVICE_AGENT_ALLOWED_VOLUMES: project,
    SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'localhost/berth-*',
    SERVICE_COMPOSE_ALLOW_BUILD: 'true',
    SERVICE_COMPOSE_BUILD_USER: user,
  });
});

after(async () => {
  await t?.stop();
  if (project) await rm(project, { recursive: true, force: true });
  const { stdout: images } = await exec('podman', ['images', '-q', '--filter', `label=berth.stack-instance=${t?.config.instanceName}`]).catch(() => ({ stdout: '' }));
  for (const image of images.split('\n').filter(Boolean)) await exec('podman', ['rmi', '--force', image]).catch(() => undefined);
  if (await userExists()) {
    // Its subordinate ranges go with it (userdel removes the /etc/subuid and /etc/subgid lines of the user).
    await exec('userdel', [user]);
    for (const file of ['/etc/subuid', '/etc/subgid']) {
      const lines = (await readFile(file, 'utf8')).split('\n');
      if (lines.some((line) => line.startsWith(`${user}:`))) await writeFile(file, lines.filter((line) => !line.startsWith(`${user}:`)).join('\n'));
    }
  }
});

test('SERVICE_COMPOSE_BUILD_USER: the build runs as that user, created with a subordinate range when missing', async () => {
  const dir = join(project, 'stack');
  await mkdir(join(dir, 'agent'), { recursive: true });
  await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { build: { context: './agent' } } } }));
  await writeFile(join(dir, 'agent', 'Dockerfile'), `FROM ${REDIS}\nUSER root\nRUN cat /proc/self/uid_map > /build-uid-map\nUSER agent\n`);
  const run = await t.request('POST', '/run', {
    prompt: 'run: cat /build-uid-map',
    container: { environment: { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' } },
  });
  assert.equal(run.status, 200, JSON.stringify(run.body));
  try {
    assert.ok(await userExists(), 'the configured user was created');
    const uid = (await exec('id', ['-u', user])).stdout.trim();
    const range = (await readFile('/etc/subuid', 'utf8')).split('\n').find((line) => line.startsWith(`${user}:`));
    assert.ok(range, 'with a subordinate uid range');
    const [, start] = range.split(':');
    // Rootless Podman maps build root to the user itself and the image's other ids into its subordinate range.
    const map = String(run.body.output).trim().split('\n').map((line) => line.trim().split(/\s+/));
    assert.deepEqual(map[0], ['0', uid, '1'], `build root was ${user} (uid ${uid}): ${run.body.output}`);
    assert.equal(map[1]?.[1], start, 'the other ids in its subordinate range');
  } finally {
    assert.equal((await t.request('DELETE', `/sessions/${run.body.session_id}`)).status, 200);
  }
  assert.deepEqual(await stackResourcesOf(t.config.instanceName), { containers: [], volumes: [], networks: [] });
});
