// The engine container with a disk limit (runtime/run-disk.ts): read-only root file system, and every place
// the run writes mounted from its disk, except a workdir a volume already provides.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { validateRunRequest } from '../../src/core/validation/validate-run.js';
import { engineContainer, type EngineContainerSettings } from '../../src/core/containers/engine-container.js';
import { RunInputs } from '../../src/core/containers/run-inputs.js';
import type { EngineAccess } from '../../src/core/engine-access.js';
import type { PreparedSession } from '../../src/core/sessions/session-store.js';
import type { RunRequest } from '../../src/core/run-request.js';
import { writablePaths } from '../../src/runtime/run-disk.js';
import { RunGrants } from '../../src/core/gateway/run-grants.js';
import { SqliteGrantStore } from '../../src/store/gateway/sqlite-grant-store.js';

const config = loadConfig({ SERVICE_AUTH_ENABLED: 'false', SERVICE_AGENT_ALLOW_ALL_VOLUMES: 'true' });
const access = {
  current: () => ({ mode: 'offline-model', upstream: { baseUrl: 'http://127.0.0.1:1', credential: { kind: 'api_key', value: 'k' } }, offline: true, message: '' }),
} as unknown as EngineAccess;
const settings: EngineContainerSettings = {
  engineAccess: access,
  gateway: { url: 'http://10.89.0.1:8788', grants: new RunGrants(new SqliteGrantStore(':memory:')) },
  engineTree: '/engine',
  instanceId: 'test',
  pidsLimit: 512,
  network: 'podman',
  userNamespace: { kind: 'rootless' },
  workdirAutoCreate: true,
  inputs: new RunInputs('/sessions', '/sessions'),
};
const RUN_DIR = '/sessions/.runs/run-1';

function session(onDisk: boolean): PreparedSession {
  return {
    sessionId: '3f2c1a7e-8d9b-4c1e-9f0a-1b2c3d4e5f60',
    engineSession: { kind: 'new', sessionId: '3f2c1a7e-8d9b-4c1e-9f0a-1b2c3d4e5f60' },
    mountPath: RUN_DIR,
    ...(onDisk ? { writable: writablePaths(RUN_DIR) } : {}),
    persistent: true,
    release: async () => undefined,
  };
}

async function specFor(request: RunRequest, onDisk = true) {
  const plan = await validateRunRequest(request, { config, secretExists: async () => true, fs: { realpath: async (p) => p, lstat: async () => ({}) } });
  const volumeSources = plan.container.volumes.map((v) => v.hostPath);
  return engineContainer(settings, { id: 'run-1', plan, session: session(onDisk), volumeSources, engineBinary: '/opt/claude/claude' }).spec;
}

const mountsOf = (spec: Awaited<ReturnType<typeof specFor>>) => Object.fromEntries(spec.bindMounts.map((m) => [m.containerPath, m.hostPath]));

test('with a disk: read-only root, and the workdir, /tmp, /var/tmp and HOME on the run\'s disk', async () => {
  const spec = await specFor({ prompt: 'hi' });
  assert.equal(spec.readOnlyRootfs, true);
  assert.equal(spec.env.HOME, '/var/lib/berth/home');
  const mounts = mountsOf(spec);
  assert.equal(mounts['/var/lib/berth/engine'], RUN_DIR);
  assert.equal(mounts['/workspace'], `${RUN_DIR}/.berth-writable/workdir`);
  assert.equal(mounts['/tmp'], `${RUN_DIR}/.berth-writable/tmp`);
  assert.equal(mounts['/var/tmp'], `${RUN_DIR}/.berth-writable/var-tmp`);
  assert.equal(mounts['/var/lib/berth/home'], `${RUN_DIR}/.berth-writable/home`);
});

test('a workdir a volume provides, or one under /tmp, gets no mount of its own', async () => {
  const onVolume = mountsOf(await specFor({ prompt: 'hi', workdir: '/work/project', container: { volumes: ['/srv/project:/work'] } }));
  assert.equal(onVolume['/work'], '/srv/project');
  assert.equal(onVolume['/work/project'], undefined);
  const underTmp = await specFor({ prompt: 'hi', workdir: '/tmp/job' });
  assert.equal(mountsOf(underTmp)['/tmp/job'], undefined);
  assert.equal(underTmp.bindMounts.filter((m) => m.hostPath.includes('.berth-writable')).length, 3);
});

test('without a disk (rootless Podman): the image\'s root stays writable and nothing is added', async () => {
  const spec = await specFor({ prompt: 'hi' }, false);
  assert.equal(spec.readOnlyRootfs, undefined);
  assert.equal(spec.env.HOME, undefined);
  assert.deepEqual(spec.bindMounts.map((m) => m.containerPath), ['/var/lib/berth/engine', '/run/berth/input', '/opt/claude']);
});
