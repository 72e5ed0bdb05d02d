import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readPullStream } from '../../src/runtime/podman/pull-stream.js';
import { RegistryError } from '../../src/runtime/container-runtime.js';

async function* chunks(...parts: string[]) {
  for (const part of parts) yield Buffer.from(part);
}

test('the id comes from the last line, even when lines are split across chunks', async () => {
  const progress: string[] = [];
  const result = await readPullStream(
    chunks('{"stream":"Trying to pull x...\\n"}\n{"stream":"Writing', ' manifest\\n"}\n{"images":["abc"],"id":"abc"}'),
    (line) => progress.push(line),
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
