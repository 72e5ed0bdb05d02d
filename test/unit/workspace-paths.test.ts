// The paths a caller may name in a workspace: plain relative paths only, refused with a 400 naming the field.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { parseWorkspacePath } from '../../src/core/workspaces/workspace-paths.js';
import { parseRange } from '../../src/http/byte-range.js';

function refusal(raw: string, options?: Parameters<typeof parseWorkspacePath>[1]): string {
  try {
    parseWorkspacePath(raw, options);
  } catch (error) {
    assert.ok(error instanceof BerthError);
    assert.equal(error.status, 400);
    return error.message;
  }
  assert.fail(`${JSON.stringify(raw)} was accepted`);
}

test('plain relative paths are split into their segments', () => {
  assert.deepEqual(parseWorkspacePath('src/main.py').segments, ['src', 'main.py']);
  assert.equal(parseWorkspacePath('a/b/').text, 'a/b');
  assert.deepEqual(parseWorkspacePath('.berth/x').segments, ['.berth', 'x'], '.berth is an ordinary name inside the tree');
  assert.deepEqual(parseWorkspacePath('..a/b..').segments, ['..a', 'b..']);
});

test('names are bytes: no Unicode normalisation', () => {
  const nfd = 'cafe\u0301.txt';
  assert.equal(parseWorkspacePath(nfd).text, nfd);
  assert.notEqual(parseWorkspacePath(nfd).text, nfd.normalize('NFC'));
});

test('traversal, absolute paths, NUL and empty segments are refused naming the field', () => {
  for (const raw of ['..', '../etc/passwd', 'a/../../b', 'a/..', './a', 'a/./b', '/etc/passwd', 'a//b', 'a\0b', '\0']) {
    assert.match(refusal(raw), /^path: /, raw);
  }
  assert.match(refusal('..', { field: 'archive path' }), /^archive path: /);
});

test('the root is a path only where a listing allows it', () => {
  assert.match(refusal(''), /root/);
  assert.deepEqual(parseWorkspacePath('', { allowRoot: true }).segments, []);
  assert.match(refusal('/', { allowRoot: true }), /absolute/);
});

test('lengths are bounded in bytes: 4096 for the path, 255 per segment', () => {
  assert.equal(parseWorkspacePath('x'.repeat(255)).text.length, 255);
  assert.match(refusal('x'.repeat(256)), /255 bytes/);
  assert.match(refusal('é'.repeat(128)), /255 bytes/, '256 bytes in 128 characters');
  assert.match(refusal(Array.from({ length: 20 }, () => 'y'.repeat(250)).join('/')), /4096 bytes/);
});

test('Range: one range, a suffix, an open end; past the end is unsatisfiable; several ranges answer the whole file', () => {
  assert.equal(parseRange(undefined, 10), undefined);
  assert.deepEqual(parseRange('bytes=2-5', 10), { start: 2, end: 5 });
  assert.deepEqual(parseRange('bytes=6-', 10), { start: 6, end: 9 });
  assert.deepEqual(parseRange('bytes=-3', 10), { start: 7, end: 9 });
  assert.deepEqual(parseRange('bytes=-30', 10), { start: 0, end: 9 });
  assert.deepEqual(parseRange('bytes=8-100', 10), { start: 8, end: 9 });
  assert.equal(parseRange('bytes=10-', 10), 'unsatisfiable');
  assert.equal(parseRange('bytes=0-', 0), 'unsatisfiable');
  assert.equal(parseRange('bytes=0-1,4-5', 10), undefined);
  assert.equal(parseRange('items=0-1', 10), undefined);
  assert.equal(parseRange('bytes=5-2', 10), undefined);
});
