import { test } from 'node:test';
import assert from 'node:assert/strict';
import { factsFromPaths, probedPaths, rankImage } from '../../src/core/images/compatibility.js';

const GLIBC = '/lib64/ld-linux-x86-64.so.2';
const MUSL = '/lib/ld-musl-x86_64.so.1';
const facts = (...paths: string[]) => factsFromPaths(new Set(paths));

test('the official image ranks 1 when it has glibc', () => {
  assert.deepEqual(rankImage(facts(GLIBC), true), { rank: 1, compatible: true });
});

test('glibc with bash and git is verified compatible (rank 2)', () => {
  assert.deepEqual(rankImage(facts(GLIBC, '/usr/bin/bash', '/usr/bin/git'), false), { rank: 2, compatible: true });
});

test('glibc without bash or git is standard glibc (rank 3)', () => {
  assert.deepEqual(rankImage(facts(GLIBC, '/usr/bin/bash'), false), { rank: 3, compatible: true });
  assert.deepEqual(rankImage(facts(GLIBC, '/usr/bin/git'), false), { rank: 3, compatible: true });
});

test('musl is rank 4 and incompatible, even when labelled official or glibc is present too', () => {
  assert.deepEqual(rankImage(facts(MUSL, '/bin/bash', '/usr/bin/git'), true), { rank: 4, compatible: false });
  assert.deepEqual(rankImage(facts(MUSL, GLIBC), false), { rank: 4, compatible: false });
});

test('an image without any C library (FROM scratch) is rank 4 and incompatible', () => {
  assert.deepEqual(rankImage(facts('/claude'), false), { rank: 4, compatible: false });
});

test('tools are found in /usr/bin, /bin and /usr/local/bin, reported once each in a fixed order', () => {
  const found = facts('/usr/local/bin/node', '/usr/local/bin/npm', '/bin/sh', '/usr/bin/bash', '/bin/bash', '/usr/bin/python3');
  assert.deepEqual(found.tools, ['bash', 'sh', 'python3', 'node', 'npm']);
});

test('one probe covers the loaders and every tool directory', () => {
  const paths = probedPaths();
  for (const path of [GLIBC, MUSL, '/usr/bin/git', '/bin/bash', '/usr/local/bin/node']) assert.ok(paths.includes(path), path);
  assert.equal(new Set(paths).size, paths.length);
});
