// Issue 23, finding 7 for compose stacks and builds, performed against a real Berth on real Podman: a stack
// service and a build step each try to fill the host's disk. Everything a service can write (its named
// volumes, /tmp, /var/tmp, /run) is on its stack's own disk (SERVICE_COMPOSE_STACK_DISK, 256m here) and its
// root file system is read-only, so 3 GB of writes end in "No space left on device" and the host loses at
// most about the disk's size; a build's sandbox is a disk of its own (SERVICE_COMPOSE_BUILD_DISK), so a
// RUN step writing more fails the build with an error naming the limit. Nothing of either disk (mount, loop
// device, image file, volume binding, sandbox) is left afterwards.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import pino from 'pino';
import { startBerth } from '../../src/server.js';
import { LoopDisks } from '../../src/runtime/run-disk.js';
import { StackDisks } from '../../src/runtime/stack-disk.js';
import { stackResourcesOf, startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';
const MUSL = 'localhost/berth-test-musl:latest';
const MIB = 1024 ** 2;

/** Free bytes of the host file system Berth's directories are on. */
async function hostFree(path: string): Promise<number> {
  const stats = await statfs(path);
  return stats.bavail * stats.bsize;
}

/** Mounts (as the host sees them) and loop devices of this test Berth's stack disks or of its builds' sandboxes. */
async function disksOf(t: TestBerth, kind: 'stacks' | 'builds'): Promise<string[]> {
  const ours = (path: string) => (kind === 'stacks' ? path.startsWith(join(t.config.agent.sessionsDir, '.stacks')) : path.includes(`/berth-build-${t.config.instanceName}-`));
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((line) => line.split(' ')[4] ?? '').filter(ours);
  const loops = (await exec('losetup', ['--list', '--noheadings', '--output', 'BACK-FILE'])).stdout.split('\n').map((file) => file.trim()).filter(ours);
  return [...mounts.map((path) => `mount ${path}`), ...loops.map((file) => `loop ${file}`)];
}

/** Volume data directories of the session's stack still bound (a binding that outlived its volume). */
async function boundVolumeData(sessionId: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((line) => line.split(' ')[4] ?? '');
  return mounts.filter((path) => path.includes(`/volumes/berth-stack-${sessionId}-`) || path.includes(`/volumes/berth-stackfs-${sessionId}-`));
}

async function sandboxesOf(t: TestBerth): Promise<string[]> {
  return (await readdir(tmpdir())).filter((entry) => entry.startsWith(`berth-build-${t.config.instanceName}-`));
}

describe('bounded disk of compose stacks and builds', () => {
  let t: TestBerth;
  let project: string;
  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'berth-attack-compose-disk-'));
    t = await startTestBerth({
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_COMPOSE_STACK_DISK: '256m',
      SERVICE_COMPOSE_ALLOW_BUILD: 'true',
      SERVICE_COMPOSE_BUILD_DISK: '256m',
      SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'localhost/berth-test-*',
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
    });
  });
  after(async () => {
    await t?.stop();
    await rm(project, { recursive: true, force: true });
  });

  test('a service writing 3 GB into its volume, /tmp, /var/tmp and /run gets ENOSPC within the 256m stack disk; its root is read-only; the engine shares the volume', async () => {
    const dir = join(project, 'fill');
    await mkdir(dir, { recursive: true });
    const compose = {
      services: {
        app: { image: REDIS, volumes: ['data:/shared'] },
        side: { image: REDIS, command: ['sleep', 'infinity'], volumes: ['data:/data'] },
      },
      volumes: { data: {} },
    };
    await writeFile(join(dir, 'compose.yaml'), stringify(compose));
    const environment = { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' };
    // The engine's container mounts the stack's volume too: it writes there, the service reads it.
    const run = await t.request('POST', '/run', { prompt: 'run: echo from-the-engine > /shared/note && cat /shared/note', container: { environment } });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.match(run.body.output, /from-the-engine/);
    const sessionId: string = run.body.session_id;
    try {
      await fillStack(sessionId);
    } finally {
      // Removed with its session (also when an assertion failed: the next tests start from nothing).
      const deleted = await t.request('DELETE', `/sessions/${sessionId}`);
      assert.ok(deleted.status < 300, JSON.stringify(deleted.body));
    }
    const { containers, volumes, networks } = await stackResourcesOf(t.config.instanceName);
    assert.deepEqual([...containers, ...volumes, ...networks], []);
    assert.deepEqual(await disksOf(t, 'stacks'), []);
    assert.deepEqual(await boundVolumeData(sessionId), []);
    assert.deepEqual(await readdir(join(t.config.agent.sessionsDir, '.stacks')), []);
  });

  async function fillStack(sessionId: string): Promise<void> {
    const side = `berth-stack-${sessionId}-side`;
    // As the container's root: the strongest writer a service has.
    const shell = async (script: string) => (await exec('podman', ['exec', '--user', 'root', side, 'sh', '-c', script], { maxBuffer: 1024 * 1024 })).stdout;
    assert.equal((await shell('cat /data/note')).trim(), 'from-the-engine');

    const places = ['/data', '/tmp', '/var/tmp', '/run'];
    const before = await hostFree(t.dir);
    let lowest = before;
    const sampling = setInterval(() => void hostFree(t.dir).then((free) => (lowest = Math.min(lowest, free))), 100);
    let report: string;
    try {
      // Each place is filled in turn and emptied again: together they share the stack's one disk.
      report = await shell(places.map((place, index) =>
        `dd if=/dev/zero of=${place}/big bs=1M count=3000 2>&1 | grep -o "No space left on device" | head -1; echo "place ${index}: $(du -sm ${place}/big | cut -f1) MiB"; rm -f ${place}/big`).join('; '));
    } finally {
      clearInterval(sampling);
    }
    assert.equal(report.match(/No space left on device/g)?.length, places.length, report);
    for (const [index, place] of places.entries()) {
      const written = Number(new RegExp(`place ${index}: (\\d+) MiB`).exec(report)?.[1] ?? NaN);
      assert.ok(written > 150 && written <= 256, `${place}: ${written} MiB written (${report})`);
    }
    // Other processes share this host's disk: a margin for them, far below the 3 GB one place would take.
    const dropped = (before - lowest) / MIB;
    assert.ok(dropped < 1024, `the host's free space dropped by ${dropped.toFixed(0)} MiB`);
    const image = await stat(join(t.config.agent.sessionsDir, '.stacks', `${sessionId}.disk`));
    assert.ok(image.blocks * 512 <= 256 * MIB, `the stack's disk image took ${((image.blocks * 512) / MIB).toFixed(0)} MiB of the host`);

    // Everything else of the service is read-only.
    const readOnly = await shell(`${['/big', '/etc/big', '/usr/big', '/home/agent/big'].map((path) => `touch ${path} 2>&1 | grep -o "Read-only file system"`).join('; ')}; true`);
    assert.equal(readOnly.match(/Read-only file system/g)?.length, 4, readOnly);
  }

  test('a build whose RUN step writes more than its 256m disk fails with an error naming the limit and leaves nothing', async () => {
    const dir = join(project, 'build');
    await mkdir(join(dir, 'ctx'), { recursive: true });
    await writeFile(join(dir, 'ctx', 'Containerfile'), `FROM ${MUSL}\nRUN dd if=/dev/zero of=/big bs=1M count=3000\n`);
    const compose = { services: { app: { image: REDIS }, side: { build: { context: './ctx', dockerfile: 'Containerfile' }, command: ['sleep', 'infinity'] } } };
    await writeFile(join(dir, 'compose.yaml'), stringify(compose));
    const before = await hostFree(t.dir);
    let lowest = before;
    const sampling = setInterval(() => void hostFree(t.dir).then((free) => (lowest = Math.min(lowest, free))), 100);
    let response;
    try {
      response = await t.request('POST', '/run', { prompt: 'say: never', container: { environment: { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' } } });
    } finally {
      clearInterval(sampling);
    }
    assert.equal(response.status, 500, JSON.stringify(response.body));
    console.log(`  the build's error: ${response.body.error}`);
    assert.match(response.body.error, /the build of service "side" failed.*ran out of its disk of 256 MiB \(SERVICE_COMPOSE_BUILD_DISK/s);
    assert.match(response.body.error, /No space left on device/);
    const dropped = (before - lowest) / MIB;
    assert.ok(dropped < 1024, `the host's free space dropped by ${dropped.toFixed(0)} MiB`);
    assert.deepEqual(await disksOf(t, 'builds'), []);
    assert.deepEqual(await sandboxesOf(t), []);
    const { stdout: images } = await exec('podman', ['images', '--filter', `label=berth.stack-instance=${t.config.instanceName}`, '--format', '{{.Repository}}']);
    assert.equal(images.trim(), '');
    const { containers, volumes, networks } = await stackResourcesOf(t.config.instanceName);
    assert.deepEqual([...containers, ...volumes, ...networks], []);
  });

  test('a build whose base images do not fit its disk fails naming the limit and leaves nothing', async () => {
    const dir = join(project, 'big-base');
    await mkdir(join(dir, 'ctx'), { recursive: true });
    // The Redis image (138 MB) is copied in as an archive and then unpacked into vfs storage: more than 256m.
    await writeFile(join(dir, 'ctx', 'Containerfile'), `FROM ${REDIS}
RUN true
`);
    await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { image: REDIS }, side: { build: { context: './ctx', dockerfile: 'Containerfile' }, command: ['sleep', 'infinity'] } } }));
    const response = await t.request('POST', '/run', { prompt: 'say: never', container: { environment: { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' } } });
    assert.equal(response.status, 500, JSON.stringify(response.body));
    console.log(`  the build's error: ${response.body.error}`);
    assert.match(response.body.error, /the build of service "side" failed.*ran out of its disk of 256 MiB \(SERVICE_COMPOSE_BUILD_DISK/s);
    assert.deepEqual(await disksOf(t, 'builds'), []);
    assert.deepEqual(await sandboxesOf(t), []);
    const { containers, volumes, networks } = await stackResourcesOf(t.config.instanceName);
    assert.deepEqual([...containers, ...volumes, ...networks], []);
  });

  test('a stop leaves a stack its disk; the next start adopts both and removes the disks and build sandboxes a killed process left', async () => {
    const dir = join(project, 'restart');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { image: REDIS }, side: { image: REDIS, command: ['sleep', 'infinity'], volumes: ['data:/data'] } }, volumes: { data: {} } }));
    const run = await t.request('POST', '/run', { prompt: 'say: up', container: { environment: { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' } } });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const sessionId: string = run.body.session_id;
    const stacksDir = join(t.config.agent.sessionsDir, '.stacks');
    // A build in progress at the stop: ended by the stop, its disk and sandbox removed.
    const slow = join(project, 'slow');
    await mkdir(join(slow, 'ctx'), { recursive: true });
    await writeFile(join(slow, 'ctx', 'Containerfile'), `FROM ${MUSL}\nRUN sleep 600\n`);
    await writeFile(join(slow, 'compose.yaml'), stringify({ services: { app: { image: REDIS }, side: { build: { context: './ctx', dockerfile: 'Containerfile' }, command: ['sleep', 'infinity'] } } }));
    const building = t.request('POST', '/run', { prompt: 'say: never', container: { environment: { type: 'compose', path: join(slow, 'compose.yaml'), service: 'app' } } }).catch(() => undefined);
    for (let waited = 0; !(await exec('ps', ['-u', 'berth-build', '-o', 'args=']).then(({ stdout }) => stdout.includes('sleep 600'), () => false)); waited += 200) {
      assert.ok(waited < 60_000, 'the slow build did not reach its RUN step');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal((await disksOf(t, 'builds')).length, 2, 'the build runs on its disk');
    // What a killed process leaves: the disk of a stack it was making, and a build's sandbox on its disk.
    await new StackDisks(stacksDir, new LoopDisks(), 64 * MIB).create('killed-while-making');
    const sandbox = join(tmpdir(), `berth-build-${t.config.instanceName}-${randomBytes(6).toString('hex')}`);
    await new LoopDisks().create(sandbox, 64 * MIB, { bare: true });
    const stopping = Date.now();
    await t.berth.stop();
    console.log(`  the stop took ${Date.now() - stopping} ms with a build in progress`);
    await building;
    assert.deepEqual((await disksOf(t, 'stacks')).length, 4, 'a stop leaves the disks mounted');
    assert.deepEqual(await disksOf(t, 'builds'), [`mount ${sandbox}`, `loop ${sandbox}.disk`], 'the stop ended the build in progress');
    assert.deepEqual((await sandboxesOf(t)).sort(), [sandbox, `${sandbox}.disk`].map((path) => path.slice(tmpdir().length + 1)).sort());
    assert.equal((await exec('ps', ['-u', 'berth-build', '-o', 'args=']).catch(() => ({ stdout: '' }))).stdout.includes('sleep 600'), false, 'the build\'s step was killed');

    const next = await startBerth(t.config, pino({ level: 'error' }));
    try {
      assert.deepEqual(await disksOf(t, 'stacks'), [`mount ${join(stacksDir, sessionId)}`, `loop ${join(stacksDir, sessionId)}.disk`]);
      assert.deepEqual(await disksOf(t, 'builds'), []);
      assert.deepEqual(await sandboxesOf(t), []);
      // The adopted stack still writes only to its disk.
      const { stdout } = await exec('podman', ['exec', `berth-stack-${sessionId}-side`, 'sh', '-c', 'dd if=/dev/zero of=/data/big bs=1M count=1000 2>&1 | grep -o "No space left on device"; rm -f /data/big']);
      assert.equal(stdout.trim(), 'No space left on device');
      const deleted = await fetch(`${next.url}/sessions/${sessionId}`, { method: 'DELETE' });
      assert.ok(deleted.status < 300, await deleted.text());
      assert.deepEqual(await disksOf(t, 'stacks'), []);
      assert.deepEqual(await readdir(stacksDir), []);
    } finally {
      await next.stop();
      // Whatever an assertion above left of the simulated build goes too, so that the failure shown is the assertion's.
      await new LoopDisks().release(sandbox).catch(() => undefined);
      await rm(sandbox, { recursive: true, force: true });
    }
  });
});
