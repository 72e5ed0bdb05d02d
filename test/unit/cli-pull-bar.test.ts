// The progress of `berth images pull` away from a terminal (Podman's lines, one each) and its blob count.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PullBar, blobCount } from '../../packages/cli/src/pull-bar.js';

test('away from a terminal each progress line is printed as it is, and nothing else', () => {
  let written = '';
  const stream = { isTTY: false, write: (text: string) => ((written += text), true) } as unknown as NodeJS.WriteStream;
  const bar = new PullBar('r.test/team/app:1', stream);
  bar.progress({ phase: 'progress', image: 'r.test/team/app:1', elapsed_ms: 5, message: 'Copying blob sha256:aaa', blobs_started: 1 });
  bar.progress({ phase: 'progress', image: 'r.test/team/app:1', elapsed_ms: 9, message: 'Copying config sha256:ccc', blobs_started: 1, blobs_done: 1 });
  bar.done();
  assert.equal(written, 'Copying blob sha256:aaa\nCopying config sha256:ccc\n');
});

test('the blob count says what is known: blobs started, then every blob copied', () => {
  assert.equal(blobCount(0), '0 blobs');
  assert.equal(blobCount(1), '1 blob started');
  assert.equal(blobCount(3), '3 blobs started');
  assert.equal(blobCount(3, 3), '3/3 blobs copied');
  assert.equal(blobCount(1, 1), '1/1 blob copied');
});

test('on a terminal the full bar is drawn again below the last lines, also when they came after it was full', async () => {
  let written = '';
  const stream = { isTTY: true, columns: 200, rows: 50, write: (text: string) => ((written += text), true), on: () => stream, removeListener: () => stream } as unknown as NodeJS.WriteStream;
  const bar = new PullBar('r.test/team/app:1', stream);
  bar.progress({ phase: 'progress', image: 'r.test/team/app:1', elapsed_ms: 9, message: 'Copying config sha256:ccc', blobs_started: 1, blobs_done: 1 });
  // A frame draws the full bar; the pull's last lines come within the same second.
  await new Promise((resolve) => setTimeout(resolve, 250));
  bar.progress({ phase: 'progress', image: 'r.test/team/app:1', elapsed_ms: 20, message: 'Storing signatures', blobs_started: 1, blobs_done: 1 });
  bar.done();
  const afterLastLine = written.slice(written.lastIndexOf('Storing signatures'));
  assert.match(afterLastLine, /pulling r\.test\/team\/app:1 \[={30}\] 1\/1 blob copied/);
});
