// Issue 23, finding 7 for compose stacks and builds: their disk sizes (config), the service container's
// read-only root (container-spec), and where a stack's disk lives (runtime/stack-disk.ts, with a fake disk).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';
import { toServiceSpecGenerator } from '../../src/runtime/podman/container-spec.js';
import type { RunDisks } from '../../src/runtime/run-disk.js';
import { StackDisks } from '../../src/runtime/stack-disk.js';

const base = { SERVICE_AUTH_ENABLED: 'false' };
const GIB = 1024 ** 3;

test('a stack disk is 4g and a build disk 8g by default; each is settable, at least 64m', () => {
  assert.equal(loadConfig(base).compose.stackDiskBytes, 4 * GIB);
  assert.equal(loadConfig(base).compose.buildDiskBytes, 8 * GIB);
  const set = loadConfig({ ...base, SERVICE_COMPOSE_STACK_DISK: '256m', SERVICE_COMPOSE_BUILD_DISK: '1g' }).compose;
  assert.deepEqual([set.stackDiskBytes, set.buildDiskBytes], [256 * 1024 ** 2, GIB]);
  for (const name of ['SERVICE_COMPOSE_STACK_DISK', 'SERVICE_COMPOSE_BUILD_DISK']) {
    assert.throws(() => loadConfig({ ...base, [name]: '32m' }), (error: unknown) => error instanceof ConfigError && new RegExp(`${name}.*64m`).test(error.message));
    assert.throws(() => loadConfig({ ...base, [name]: 'lots' }), (error: unknown) => error instanceof ConfigError && error.message.includes(name));
  }
});

test("a service's root file system is read-only, without Podman's tmpfs, and its image's VOLUMEs are tmpfs", () => {
  const spec = toServiceSpecGenerator({
    name: 'berth-stack-s-db', image: 'localhost/db', env: {}, labels: {}, bindMounts: [],
    volumeMounts: [{ volume: 'berth-stackfs-s-db-tmp', containerPath: '/tmp', readOnly: false }],
    network: undefined, restart: 'no', memoryBytes: GIB, cpus: 1, pidsLimit: 512,
    userNamespace: { kind: 'rootless' },
    privileges: { privileged: false, capAdd: [], devices: [], seccompUnconfined: false, apparmorUnconfined: false, labelDisable: false, hostNetwork: false, hostPid: false, hostIpc: false },
  });
  assert.equal(spec.read_only_filesystem, true);
  assert.equal(spec.read_write_tmpfs, undefined);
  assert.equal(spec.image_volume_mode, 'tmpfs');
  assert.deepEqual(spec.volumes, [{ Name: 'berth-stackfs-s-db-tmp', Dest: '/tmp', Options: ['rw', 'nosuid', 'nodev'] }]);
});

test("a stack's disk is a bare disk at <dir>/<session id>; session ids never leave the directory; leftovers are found by name or image", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-stack-disks-'));
  try {
    const calls: string[] = [];
    const fake: RunDisks = {
      create: async (mountPoint, bytes, options) => void calls.push(`create ${mountPoint} ${bytes} ${options?.bare === true ? 'bare' : 'places'}`),
      release: async (mountPoint) => void calls.push(`release ${mountPoint}`),
    };
    const disks = new StackDisks(dir, fake, 1024);
    await disks.create('session-1');
    assert.deepEqual(calls, [`create ${join(dir, 'session-1')} 1024 bare`]);
    for (const bad of ['../x', 'a/b', '.', '..', '.runs', '']) await assert.rejects(disks.create(bad), /not a session id/);
    await writeFile(join(dir, 'left.disk'), '');
    await writeFile(join(dir, 'both'), '');
    await writeFile(join(dir, 'both.disk'), '');
    assert.deepEqual((await disks.sessions()).sort(), ['both', 'left']);
    await disks.release('left');
    assert.equal(calls.at(-1), `release ${join(dir, 'left')}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
