import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ImageCheck } from '../../src/core/runs/image-check.js';
import type { ContainerRuntime, ImageInfo } from '../../src/runtime/container-runtime.js';
import { BerthError } from '../../src/errors.js';

function fakeRuntime(images: Record<string, { id: string; files: string[] }>) {
  const probes: string[] = [];
  const runtime = {
    async inspectImage(reference: string): Promise<ImageInfo | undefined> {
      const image = images[reference];
      return image && { id: image.id, user: '', repoTags: [reference], size: 1 };
    },
    async imageHasAnyPath(reference: string, paths: readonly string[]) {
      probes.push(reference);
      return paths.some((p) => images[reference]!.files.includes(p));
    },
  } as unknown as ContainerRuntime;
  return { runtime, probes };
}

test('a glibc image passes and a musl image is refused by its loader, whatever its name', async () => {
  const { runtime } = fakeRuntime({
    'debian:12': { id: 'a', files: ['/lib64/ld-linux-x86-64.so.2'] },
    'innocent-name:1': { id: 'b', files: ['/lib/ld-musl-x86_64.so.1'] },
    'alpine-named-but-glibc:1': { id: 'c', files: ['/lib64/ld-linux-x86-64.so.2'] },
  });
  const check = new ImageCheck(runtime);
  assert.equal(await check.ensureRunnable('debian:12'), 'a');
  assert.equal(await check.ensureRunnable('alpine-named-but-glibc:1'), 'c');
  await assert.rejects(check.ensureRunnable('innocent-name:1'), (error: BerthError) => {
    assert.equal(error.status, 400);
    assert.match(error.message, /Alpine\/musl-based images are not supported/);
    return true;
  });
});

test('the probe runs once per image id', async () => {
  const { runtime, probes } = fakeRuntime({ 'debian:12': { id: 'a', files: [] } });
  const check = new ImageCheck(runtime);
  await check.ensureRunnable('debian:12');
  await check.ensureRunnable('debian:12');
  assert.deepEqual(probes, ['debian:12']);
});

test('a missing image is a 400 that says how to get it', async () => {
  const check = new ImageCheck(fakeRuntime({}).runtime);
  await assert.rejects(check.ensureRunnable('nope:1'), (error: BerthError) => error.status === 400 && /pull it first/.test(error.message));
});

test('a burst of first runs shares one probe of the image', async () => {
  const { runtime, probes } = fakeRuntime({ 'debian:12': { id: 'a', files: [] } });
  const check = new ImageCheck(runtime);
  await Promise.all(Array.from({ length: 8 }, () => check.ensureRunnable('debian:12')));
  assert.deepEqual(probes, ['debian:12']);
});
