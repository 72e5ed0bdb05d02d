import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ImageCheck } from '../../src/core/runs/image-check.js';
import { ImageProbe } from '../../src/core/images/image-probe.js';
import type { ImageInfo } from '../../src/runtime/ports/images.js';
import { BerthError } from '../../src/errors.js';
import { factsFromPaths, rankImage } from '../../src/core/images/compatibility.js';

const GLIBC = '/lib64/ld-linux-x86-64.so.2';

function fakeRuntime(images: Record<string, { id: string; files: string[] }>) {
  const probes: string[] = [];
  const runtime = {
    async inspectImage(reference: string): Promise<ImageInfo | undefined> {
      const image = images[reference];
      return image && { id: image.id, user: '', repoTags: [reference], size: 1 };
    },
    async existingImagePaths(reference: string, paths: readonly string[]) {
      probes.push(reference);
      return new Set(paths.filter((p) => images[reference]!.files.includes(p)));
    },
  };
  return { runtime, probes };
}

test('a glibc image passes and a musl image is refused by its loader, whatever its name', async () => {
  const { runtime } = fakeRuntime({
    'debian:12': { id: 'a', files: [GLIBC] },
    'innocent-name:1': { id: 'b', files: ['/lib/ld-musl-x86_64.so.1'] },
    'alpine-named-but-glibc:1': { id: 'c', files: [GLIBC] },
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
  const { runtime, probes } = fakeRuntime({ 'debian:12': { id: 'a', files: [GLIBC] } });
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
  const { runtime, probes } = fakeRuntime({ 'debian:12': { id: 'a', files: [GLIBC] } });
  const check = new ImageCheck(runtime);
  await Promise.all(Array.from({ length: 8 }, () => check.ensureRunnable('debian:12')));
  assert.deepEqual(probes, ['debian:12']);
});

test('an image without any C library (FROM scratch) is refused, as GET /images ranks it incompatible', async () => {
  const files = ['/payload', '/usr/local/bin/claude'];
  const { runtime } = fakeRuntime({ 'data:1': { id: 'd', files } });
  assert.equal(rankImage(factsFromPaths(new Set(files)), false).compatible, false);
  await assert.rejects(new ImageCheck(runtime).ensureRunnable('data:1'), (error: BerthError) => {
    assert.equal(error.code, 'BERTH_ERR_IMAGE_NO_GLIBC');
    assert.equal(error.status, 400);
    assert.match(error.message, /has no glibc/);
    return true;
  });
});

test('an image is probed once for the runs and GET /images when they share the probe', async () => {
  const { runtime, probes } = fakeRuntime({ 'debian:12': { id: 'a', files: [GLIBC] } });
  const probe = new ImageProbe(runtime);
  await new ImageCheck(runtime, 'mounted', probe).ensureRunnable('debian:12');
  assert.equal(rankImage(await probe.facts('debian:12', 'a'), false).compatible, true);
  assert.deepEqual(probes, ['debian:12']);
});
