import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ImageCatalog, familiarReference, splitRepoTag } from '../../src/core/images/image-catalog.js';
import { ImageProbe } from '../../src/core/images/image-probe.js';
import { RegistryError, type ImageSummary, type PullOptions } from '../../src/runtime/ports/images.js';
import { BerthError } from '../../src/errors.js';

const GLIBC = '/lib64/ld-linux-x86-64.so.2';
const MUSL = '/lib/ld-musl-x86_64.so.1';

interface FakeImage {
  id: string;
  tags: string[];
  files: string[];
  labels?: Record<string, string>;
}

function fakeRuntime(images: FakeImage[], registry: { pull?: (ref: string, o: PullOptions) => Promise<{ id: string }>; search?: () => Promise<never> } = {}) {
  const probes: string[] = [];
  const pulls: { reference: string; options: PullOptions }[] = [];
  const searches: { term: string; limit: number; tlsVerify: boolean }[] = [];
  const byRef = (ref: string) => images.find((i) => i.id === ref || i.tags.includes(ref));
  const runtime = {
    async listImages(): Promise<ImageSummary[]> {
      return images.map((i) => ({ id: i.id, repoTags: i.tags, size: 10, labels: i.labels ?? {} }));
    },
    async inspectImage(ref: string) {
      const image = byRef(ref);
      return image && { id: image.id, user: '', repoTags: image.tags, size: 10, labels: image.labels ?? {} };
    },
    async existingImagePaths(ref: string, paths: readonly string[]) {
      probes.push(ref);
      return new Set(paths.filter((p) => byRef(ref)!.files.includes(p)));
    },
    async pullImage(reference: string, options: PullOptions) {
      pulls.push({ reference, options });
      return registry.pull ? registry.pull(reference, options) : { id: 'f'.repeat(64) };
    },
    async searchImages(term: string, options: { limit: number; tlsVerify: boolean }) {
      searches.push({ term, ...options });
      if (registry.search) return registry.search();
      return Array.from({ length: 200 }, (_, n) => ({ name: `r/${n}`, description: '', stars: 0, official: false }));
    },
  };
  return { runtime, probes, pulls, searches };
}

function catalog(runtime: ReturnType<typeof fakeRuntime>['runtime'], policy: Partial<ConstructorParameters<typeof ImageCatalog>[0]['policy']> = {}) {
  return new ImageCatalog({
    runtime,
    probe: new ImageProbe(runtime),
    policy: { allowedPatterns: [], defaultImage: 'localhost/berth-agent:1', insecureRegistries: [], ...policy },
  });
}

const DEBIAN = [GLIBC, '/usr/bin/bash', '/bin/sh'];

test('the listing is sorted by rank, then by repository:tag, one record per tag', async () => {
  const { runtime } = fakeRuntime([
    { id: 'm', tags: ['localhost/alpine:1'], files: [MUSL, '/bin/sh'] },
    { id: 'g2', tags: ['docker.io/library/zeta:1', 'docker.io/library/alpha:1'], files: [...DEBIAN, '/usr/bin/git'] },
    { id: 'g3', tags: ['docker.io/library/debian:12'], files: DEBIAN },
    { id: 'a', tags: ['localhost/berth-agent:1'], files: DEBIAN },
    { id: 'dangling', tags: [], files: DEBIAN },
  ]);
  const images = await catalog(runtime).list();
  assert.deepEqual(
    images.map((i) => [i.compatibility_rank, `${i.repository}:${i.tag}`]),
    [
      [1, 'localhost/berth-agent:1'],
      [2, 'docker.io/library/alpha:1'],
      [2, 'docker.io/library/zeta:1'],
      [3, 'docker.io/library/debian:12'],
      [4, 'localhost/alpine:1'],
    ],
  );
  assert.equal(images.at(-1)!.compatible, false);
});

test('the label io.berth.agent-image=official makes an image rank 1', async () => {
  const { runtime } = fakeRuntime([{ id: 'x', tags: ['localhost/custom:2'], files: DEBIAN, labels: { 'io.berth.agent-image': 'official' } }]);
  assert.equal((await catalog(runtime).list())[0]!.compatibility_rank, 1);
});

test('tools are detected from the image files, probing once per image id across tags and calls', async () => {
  const { runtime, probes } = fakeRuntime([{ id: 'g', tags: ['localhost/a:1', 'localhost/b:1'], files: [...DEBIAN, '/usr/local/bin/node'] }]);
  const images = catalog(runtime);
  const listed = await images.list();
  await images.list();
  await images.get('localhost/a:1');
  assert.deepEqual(listed.map((i) => i.tools), [['bash', 'sh', 'node'], ['bash', 'sh', 'node']]);
  assert.deepEqual(probes, ['g']);
});

test('allowed reflects the allowlist; the default image is always allowed', async () => {
  const { runtime } = fakeRuntime([
    { id: 'a', tags: ['localhost/berth-agent:1'], files: DEBIAN },
    { id: 'p', tags: ['docker.io/library/python:3'], files: DEBIAN },
    { id: 'n', tags: ['docker.io/library/node:20'], files: DEBIAN },
  ]);
  const images = await catalog(runtime, { allowedPatterns: ['python:*'] }).list();
  assert.deepEqual(Object.fromEntries(images.map((i) => [i.repository, i.allowed])), {
    'localhost/berth-agent': true,
    'docker.io/library/python': true,
    'docker.io/library/node': false,
  });
});

test('get normalises the name, 404s an absent image and 400s an invalid one', async () => {
  const { runtime } = fakeRuntime([{ id: 'p', tags: ['docker.io/library/python:3'], files: DEBIAN }]);
  const images = catalog(runtime);
  const python = await images.get('python:3');
  assert.deepEqual([python.repository, python.tag, python.compatibility_rank], ['docker.io/library/python', '3', 3]);
  await assert.rejects(images.get('python:4'), (e: BerthError) => e.status === 404 && e.code === 'BERTH_ERR_NOT_FOUND');
  await assert.rejects(images.get('Bad..Name'), (e: BerthError) => e.status === 400);
});

test('splitRepoTag keeps a registry port in the repository', () => {
  assert.deepEqual(splitRepoTag('registry:5000/team/app:1.2'), { repository: 'registry:5000/team/app', tag: '1.2' });
  assert.deepEqual(splitRepoTag('registry:5000/team/app'), { repository: 'registry:5000/team/app', tag: '' });
});

test('familiarReference gives the short docker.io form patterns are written in', () => {
  assert.equal(familiarReference('docker.io/library/python:3'), 'python:3');
  assert.equal(familiarReference('docker.io/team/app:1'), 'team/app:1');
  assert.equal(familiarReference('docker.io/library/team/app:1'), 'library/team/app:1');
  assert.equal(familiarReference('localhost/berth-agent:1'), 'localhost/berth-agent:1');
});

test('search validates q and limit, and caps the results at the limit', async () => {
  const { runtime, searches } = fakeRuntime([]);
  const images = catalog(runtime);
  assert.equal((await images.search('python')).length, 25);
  assert.equal((await images.search('python', 100)).length, 100);
  for (const limit of [0, 101, 2.5]) await assert.rejects(images.search('python', limit), (e: BerthError) => e.status === 400);
  for (const q of ['', '   ', 'a\u0000b', 'x'.repeat(256)]) await assert.rejects(images.search(q), (e: BerthError) => e.status === 400);
  assert.deepEqual(searches.map((s) => s.limit), [25, 100]);
});

test('search skips TLS verification only for a registry listed as insecure', async () => {
  const { runtime, searches } = fakeRuntime([]);
  const images = catalog(runtime, { insecureRegistries: ['127.0.0.1:5000'] });
  await images.search('127.0.0.1:5000/team');
  await images.search('quay.io/team');
  await images.search('python');
  assert.deepEqual(searches.map((s) => s.tlsVerify), [false, true, true]);
});

test('a failing registry search is a 502', async () => {
  const { runtime } = fakeRuntime([], { search: () => Promise.reject(new RegistryError('connection refused', false)) });
  await assert.rejects(catalog(runtime).search('python'), (e: BerthError) => e.status === 502 && e.code === 'BERTH_ERR_IMAGE_SEARCH_FAILED');
});

test('pull normalises the reference, applies the insecure list and the platform', async () => {
  const { runtime, pulls } = fakeRuntime([]);
  const images = catalog(runtime, { insecureRegistries: ['127.0.0.1:5000'] });
  const result = await images.pull({ image: '127.0.0.1:5000/team/app', quiet: true, platform: 'linux/arm64/v8' });
  assert.deepEqual(result, { success: true, image_id: 'f'.repeat(64), image: '127.0.0.1:5000/team/app:latest' });
  await images.pull({ image: 'python:3' });
  assert.deepEqual(pulls.map((p) => [p.reference, p.options.tlsVerify, p.options.quiet, p.options.platform]), [
    ['127.0.0.1:5000/team/app:latest', false, true, { os: 'linux', arch: 'arm64', variant: 'v8' }],
    ['docker.io/library/python:3', true, false, undefined],
  ]);
});

test('pull refuses invalid references, disallowed references and bad platforms with a 400, before any pull', async () => {
  const { runtime, pulls } = fakeRuntime([]);
  const images = catalog(runtime, { allowedPatterns: ['python:*'] });
  await assert.rejects(images.pull({ image: 'node:20' }), (e: BerthError) => e.code === 'BERTH_ERR_IMAGE_NOT_ALLOWED' && /^image "node:20"/.test(e.message));
  await assert.rejects(images.pull({ image: 'python.evil.example/x:1' }), (e: BerthError) => e.code === 'BERTH_ERR_IMAGE_NOT_ALLOWED');
  await assert.rejects(images.pull({ image: 'UPPER/x' }), (e: BerthError) => e.status === 400);
  await assert.rejects(images.pull({ image: 'python:3', platform: 'linux' }), (e: BerthError) => e.status === 400);
  assert.equal(pulls.length, 0);
  await images.pull({ image: 'localhost/berth-agent:1' });
  assert.equal(pulls.length, 1);
});

test('pull maps "no such image" to 404 and other registry failures to 502', async () => {
  const missing = fakeRuntime([], { pull: () => Promise.reject(new RegistryError('manifest unknown', true)) });
  await assert.rejects(catalog(missing.runtime).pull({ image: 'python:3' }), (e: BerthError) => e.status === 404 && /not found/.test(e.message));
  const broken = fakeRuntime([], { pull: () => Promise.reject(new RegistryError('x509: certificate signed by unknown authority', false)) });
  await assert.rejects(catalog(broken.runtime).pull({ image: 'python:3' }), (e: BerthError) => e.status === 502 && e.code === 'BERTH_ERR_IMAGE_PULL_FAILED');
});

test('a pull reports the runtime\'s progress in the answer\'s field names and passes its signal on', async () => {
  const { runtime, pulls } = fakeRuntime([], {
    pull: async (_reference, options) => {
      options.onProgress?.({ message: 'Copying blob sha256:aaa', blobsStarted: 1 });
      options.onProgress?.({ message: 'Copying config sha256:ccc', blobsStarted: 1, blobsDone: 1 });
      return { id: 'f'.repeat(64) };
    },
  });
  const progress: unknown[] = [];
  const signal = new AbortController().signal;
  await catalog(runtime).pull({ image: 'localhost/berth-agent:1' }, { signal, onProgress: (step) => progress.push(step) });
  assert.deepEqual(progress, [
    { message: 'Copying blob sha256:aaa', blobs_started: 1 },
    { message: 'Copying config sha256:ccc', blobs_started: 1, blobs_done: 1 },
  ]);
  assert.equal(pulls[0]!.options.signal, signal);
});

test('preparePull throws its refusals at once, and a prepared pull whose signal is aborted never reaches the runtime', async () => {
  const { runtime, pulls } = fakeRuntime([]);
  const images = catalog(runtime, { allowedPatterns: ['python:*'] });
  assert.throws(() => images.preparePull({ image: 'node:20' }), (e: BerthError) => e.code === 'BERTH_ERR_IMAGE_NOT_ALLOWED');
  const prepared = images.preparePull({ image: 'python:3' });
  assert.equal(prepared.reference, 'docker.io/library/python:3');
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(prepared.run({ signal: controller.signal }), { name: 'AbortError' });
  assert.equal(pulls.length, 0);
});

test('an image removed between the listing and its probe is left out, not a 500; a probe failing otherwise still fails', async () => {
  const images: FakeImage[] = [
    { id: 'kept', tags: ['localhost/kept:1'], files: DEBIAN },
    { id: 'gone', tags: ['localhost/gone:1'], files: DEBIAN },
  ];
  const { runtime } = fakeRuntime(images);
  const probe = runtime.existingImagePaths.bind(runtime);
  // Another client removes "gone" right after Podman listed it: its probe container cannot be created.
  runtime.existingImagePaths = async (ref, paths) => {
    if (ref === 'gone') {
      images.splice(images.findIndex((image) => image.id === 'gone'), 1);
      throw new Error('Podman POST /containers/create: 500 gone: image not known');
    }
    return probe(ref, paths);
  };
  const listed = await catalog(runtime).list();
  assert.deepEqual(listed.map((image) => `${image.repository}:${image.tag}`), ['localhost/kept:1']);

  const failing = fakeRuntime([{ id: 'broken', tags: ['localhost/broken:1'], files: DEBIAN }]).runtime;
  failing.existingImagePaths = async () => {
    throw new Error('Podman is down');
  };
  await assert.rejects(catalog(failing).list(), /Podman is down/);
});
