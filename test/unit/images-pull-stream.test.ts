import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readPullStream } from '../../src/runtime/podman/pull-stream.js';
import { PullProgressCounter } from '../../src/runtime/podman/pull-progress.js';
import { RegistryError, type PullProgress } from '../../src/runtime/ports/images.js';

async function* chunks(...parts: string[]) {
  for (const part of parts) yield Buffer.from(part);
}

test('the id comes from the last line, even when lines are split across chunks', async () => {
  const progress: string[] = [];
  const result = await readPullStream(
    chunks('{"stream":"Trying to pull x...\\n"}\n{"stream":"Writing', ' manifest\\n"}\n{"images":["abc"],"id":"abc"}'),
    (step) => progress.push(step.message),
  );
  assert.deepEqual(result, { id: 'abc' });
  assert.deepEqual(progress, ['Trying to pull x...', 'Writing manifest']);
});

test('an error line is a RegistryError; "manifest unknown" means not found', async () => {
  await assert.rejects(
    readPullStream(chunks('{"stream":"Trying\\n"}\n{"error":"reading manifest 1 in r/x: manifest unknown: manifest unknown"}\n')),
    (e: RegistryError) => e instanceof RegistryError && e.notFound,
  );
  await assert.rejects(
    readPullStream(chunks('{"error":"pinging container registry 127.0.0.1:9: connect: connection refused"}\n')),
    (e: RegistryError) => e instanceof RegistryError && !e.notFound,
  );
});

test('a stream that ends without an id is a failure', async () => {
  await assert.rejects(readPullStream(chunks('{"stream":"Trying\\n"}\n')), RegistryError);
});

test('progress counts the blobs Podman starts, and reports them done once it has gone past the layers', async () => {
  const progress: PullProgress[] = [];
  const lines = [
    'Trying to pull r/x:1...',
    'Getting image source signatures',
    `Copying blob sha256:${'a'.repeat(64)}`,
    `Copying blob sha256:${'b'.repeat(64)}`,
    `Copying config sha256:${'c'.repeat(64)}`,
    'Writing manifest to image destination',
    'Storing signatures',
  ];
  const stream = lines.map((line) => JSON.stringify({ stream: `${line}\n` })).join('\n') + '\n{"id":"abc"}\n';
  await readPullStream(chunks(stream), (step) => progress.push(step));
  assert.deepEqual(progress, [
    { message: 'Trying to pull r/x:1...', blobsStarted: 0 },
    { message: 'Getting image source signatures', blobsStarted: 0 },
    { message: `Copying blob sha256:${'a'.repeat(64)}`, blobsStarted: 1 },
    { message: `Copying blob sha256:${'b'.repeat(64)}`, blobsStarted: 2 },
    { message: `Copying config sha256:${'c'.repeat(64)}`, blobsStarted: 2, blobsDone: 2 },
    { message: 'Writing manifest to image destination', blobsStarted: 2, blobsDone: 2 },
    { message: 'Storing signatures', blobsStarted: 2, blobsDone: 2 },
  ]);
});

test('a blob named twice counts once, and a new attempt counts from zero', () => {
  const counter = new PullProgressCounter();
  counter.next('Copying blob sha256:aaa');
  assert.equal(counter.next('Copying blob sha256:aaa').blobsStarted, 1);
  assert.equal(counter.next('Copying config sha256:ccc').blobsDone, 1);
  assert.deepEqual(counter.next('Trying to pull r/x:1...'), { message: 'Trying to pull r/x:1...', blobsStarted: 0 });
  assert.deepEqual(counter.next('Copying blob sha256:bbb'), { message: 'Copying blob sha256:bbb', blobsStarted: 1 });
});

test('one stream value holding several lines is several steps', async () => {
  const progress: string[] = [];
  await readPullStream(chunks('{"stream":"Copying blob sha256:aaa\\nCopying blob sha256:bbb\\n"}\n{"id":"abc"}\n'), (step) => progress.push(`${step.message}=${step.blobsStarted}`));
  assert.deepEqual(progress, ['Copying blob sha256:aaa=1', 'Copying blob sha256:bbb=2']);
});
