// PodmanRuntime is one object joined from a part per concern (runtime/podman/podman-*.ts) over one client.
// Here it talks to a stand-in for Podman's API on a unix socket, which records what it was asked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PodmanClient } from '../../src/runtime/podman/client.js';
import { PodmanRuntime } from '../../src/runtime/podman/podman-runtime.js';
import { withTranslatedErrors } from '../../src/core/runtime-errors.js';
import type { ContainerSpec } from '../../src/runtime/ports/container-specs.js';

let dir: string;
let server: Server;
let client: PodmanClient;
const asked: string[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-podman-runtime-'));
  server = createServer((request, response) => {
    asked.push(`${request.method} ${request.url?.replace(/^\/v[\d.]+\/libpod/, '')}`);
    const path = new URL(request.url ?? '/', 'http://podman').pathname;
    // The secret a secretExists asks about, by its exact name.
    const body = path.endsWith('/secrets/gh-token/json') ? { ID: 'abc', Spec: { Name: 'gh-token' } } : path.endsWith('/secrets/json') ? [{ Spec: { Name: 'b' } }, { Spec: { Name: 'a' } }] : {};
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(join(dir, 'podman.sock'), resolve));
  client = new PodmanClient(join(dir, 'podman.sock'));
});

after(async () => {
  await client.close();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

test('every concern answers through the one client', async () => {
  const runtime = new PodmanRuntime(client);
  asked.length = 0;
  await runtime.ping();
  await runtime.killContainer('c1');
  assert.equal(await runtime.removeImage('i1'), true);
  assert.equal(await runtime.secretExists('gh-token'), true);
  assert.deepEqual(await runtime.listSecrets(), ['a', 'b']);
  await runtime.removeSecret('old');
  assert.deepEqual(asked, [
    'GET /_ping',
    'POST /containers/c1/kill?signal=SIGKILL',
    'DELETE /images/i1',
    'GET /secrets/gh-token/json',
    'GET /secrets/json',
    'DELETE /secrets/old',
  ]);
});

test('a method replaced on the runtime is the one core services call, through the translated runtime too', async () => {
  const podman = new PodmanRuntime(client);
  const runtime = withTranslatedErrors(podman);
  const created: string[] = [];
  // As test/integration/sandbox.test.ts counts the containers requests create.
  podman.createContainer = async (spec) => {
    created.push(spec.name);
    return 'replaced';
  };
  assert.equal(await runtime.createContainer({ name: 'berth-x' } as ContainerSpec), 'replaced');
  assert.deepEqual(created, ['berth-x']);
  // Another runtime's parts are its own.
  assert.notEqual(new PodmanRuntime(client).createContainer, podman.createContainer);
});
