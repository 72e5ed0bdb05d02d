import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkContainerfile, ContainerfileError } from '../../src/core/compose/containerfile.js';

const refs = (text: string, args: Record<string, string> = {}) => checkContainerfile(text, args).map((image) => image.reference);

test('FROM images with global ARG defaults, build args overriding them; stages and scratch are not images', () => {
  const text = 'ARG BASE=localhost/base\nARG TAG\nFROM ${BASE}:${TAG:-1} AS build\nRUN make\nFROM scratch\nCOPY --from=build /out /out\nCOPY --from=0 /a /a\nFROM build\n';
  assert.deepEqual(refs(text), ['localhost/base:1']);
  assert.deepEqual(refs(text, { TAG: '2', BASE: 'localhost/other' }), ['localhost/other:2']);
});

test('COPY --from of an image is an image the build reads', () => {
  assert.deepEqual(refs('FROM localhost/a:1\nCOPY --chown=1:1 --from=localhost/b:2 /x /x\n'), ['localhost/a:1', 'localhost/b:2']);
});

test('continuations, comments inside them and the escape directive are read', () => {
  assert.deepEqual(refs('# escape=`\nFROM `\n  # a comment\n  localhost/a:1\nRUN echo \\\n'), ['localhost/a:1']);
  assert.throws(() => refs('FROM localhost/a:1\nRUN \\\n  --mount=type=bind,source=hostroot,target=/h cat /h/etc/shadow\n'), /RUN --mount is refused/);
});

test('what a build may not do is refused naming the line', () => {
  const refused: [string, RegExp][] = [
    ['FROM localhost/a\nRUN --mount=type=bind,source=hostroot,target=/h,rw cat /h/etc/shadow\n', /line 2 \(RUN\): RUN --mount is refused/],
    ['FROM localhost/a\nrun --mount=type=cache,id=../../..,target=/h true\n', /RUN --mount is refused/],
    ['FROM localhost/a\nRUN --network=host curl x\n', /RUN --network is refused/],
    ['FROM localhost/a\nADD http://127.0.0.1:8080/health /h\n', /ADD of a URL is refused/],
    ['FROM localhost/a\nADD ["git@github.com:x/y", "/y"]\n', /ADD of a URL is refused/],
    ['FROM localhost/a\nONBUILD RUN --mount=type=bind,source=/,target=/h true\n', /ONBUILD is not supported/],
    ['FROM --platform=linux/arm64 localhost/a\n', /flags of FROM/],
    ['FROM $UNSET\n', /empty after substituting/],
    ['FROM localhost/a:$(id)\n', /form of "\$"/],
    ['FROM localhost/a\nCOPY --from=$X /a /a\n', /--from with a variable/],
    ['FROM localhost/a\nCOPY --from=3 /a /a\n', /names no earlier stage/],
    ['RUN true\n', /it has no FROM/],
  ];
  for (const [text, expected] of refused) assert.throws(() => refs(text), (error: unknown) => error instanceof ContainerfileError && expected.test(error.message), text);
});

test('a context link points outside when absolute or up past the root; built image references are recognised in every form', async () => {
  const { pointsOutside } = await import('../../src/runtime/podman/image-build.js');
  const { isBuiltImageReference } = await import('../../src/core/compose-file/stack-definition.js');
  assert.equal(pointsOutside('./hostroot', '/'), true);
  assert.equal(pointsOutside('a/b', '../../..'), true);
  assert.equal(pointsOutside('./a/b', '../c'), false);
  assert.equal(pointsOutside('a', 'b/../../x'), true);
  for (const reference of ['localhost/berth-build-app:1', 'berth-build-app:1', 'docker.io/library/berth-build-x', 'LOCALHOST/BERTH-BUILD-APP']) {
    assert.equal(isBuiltImageReference(reference), true, reference);
  }
  assert.equal(isBuiltImageReference('localhost/berth-agent:0.1.0-alpha'), false);
});
