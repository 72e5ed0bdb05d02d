// Size and count settings no other test set (issue 28), each on a real Berth with a value far from its
// default: SERVICE_SESSIONS_MAX_BYTES (a transcript past it is not kept), SERVICE_WORKSPACE_DIFF_MAX_FILE_BYTES
// (a file past it is listed as changed, not diffed), SERVICE_COMPOSE_MAX_STACKS (a stack past it is a 503
// that leaves nothing) and SERVICE_COMPOSE_BUILD_TIMEOUT (a request's build_timeout above it is a 400).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { stackResourcesOf, startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';

describe('settings of sizes and counts', () => {
  let project: string;
  let t: TestBerth;
  const logs: Record<string, unknown>[] = [];

  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'berth-settings-limits-'));
    t = await startTestBerth({
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
      // A short conversation's transcript is about 140 KB (the engine's system records), 8 tool outputs add 200 KB.
      SERVICE_SESSIONS_MAX_BYTES: '256k',
      SERVICE_WORKSPACE_MAX_BYTES: '64m',
      SERVICE_WORKSPACE_DIFF_MAX_FILE_BYTES: '1k',
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'localhost/berth-*',
      SERVICE_COMPOSE_MAX_STACKS: '1',
      SERVICE_COMPOSE_BUILD_TIMEOUT: '2m',
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
    }, { onLog: (record) => logs.push(record) });
  });
  after(async () => {
    await t?.stop();
    if (project) await rm(project, { recursive: true, force: true });
  });

  test('SERVICE_SESSIONS_MAX_BYTES: a transcript larger than it is not kept; a small one is', async () => {
    const small = await t.request('POST', '/run', { prompt: 'say: a short conversation' });
    assert.equal(small.status, 200, JSON.stringify(small.body));
    const kept = await t.request('GET', `/sessions/${small.body.session_id}/messages`);
    assert.equal(kept.status, 200, `the short transcript is kept: ${JSON.stringify(logs.filter((r) => r.level === 40)).slice(0, 2000)}`);
    assert.ok(kept.body.messages.length > 0);
    // Eight tool calls of 25,000 bytes of output each (the engine keeps up to 30,000 of one): past 256 KiB.
    const command = 'head -c 25000 /dev/zero | tr "\\0" x';
    const large = await t.request('POST', '/run', { prompt: Array.from({ length: 8 }, () => `run: ${command}`).join('\n') });
    assert.equal(large.status, 200, JSON.stringify(large.body));
    const notKept = await t.request('GET', `/sessions/${large.body.session_id}/messages`);
    assert.equal(notKept.status, 404, `the large transcript was not kept: ${JSON.stringify(notKept.body).slice(0, 300)}`);
    assert.ok(logs.some((record) => JSON.stringify(record).includes(String(large.body.session_id)) && record.level === 40), 'a warning names the session');
  });

  test('SERVICE_WORKSPACE_DIFF_MAX_FILE_BYTES: a changed file larger than it is listed as too_large, not diffed', async () => {
    const created = await t.request('POST', '/workspaces', {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.id;
    try {
      // An archive upload takes the `upload` checkpoint.
      const tree = join(project, 'tree');
      await mkdir(tree, { recursive: true });
      await writeFile(join(tree, 'small.txt'), 'one\n');
      await writeFile(join(tree, 'large.txt'), `${'a'.repeat(2_000)}\n`);
      const archive = join(project, 'tree.tar');
      await exec('tar', ['-C', tree, '-cf', archive, 'small.txt', 'large.txt']);
      const uploaded = await fetch(`${t.url}/workspaces/${id}/archive`, { method: 'POST', body: await readFile(archive) });
      assert.ok(uploaded.ok, `archive: ${uploaded.status} ${await uploaded.text()}`);
      for (const [path, content] of [['small.txt', 'two\n'], ['large.txt', `${'b'.repeat(2_000)}\n`]]) {
        const put = await fetch(`${t.url}/workspaces/${id}/files/${path}`, { method: 'PUT', body: content });
        assert.ok(put.ok, `${path}: ${put.status}`);
      }
      const diff = await t.request('GET', `/workspaces/${id}/diff?since=upload`);
      assert.equal(diff.status, 200, JSON.stringify(diff.body));
      assert.deepEqual([...diff.body.changed].sort(), ['large.txt', 'small.txt']);
      assert.deepEqual(diff.body.too_large, ['large.txt'], 'over 1 KiB: listed, not diffed');
      assert.match(diff.body.diff, /^-one$/m, 'the small file is diffed');
      assert.doesNotMatch(diff.body.diff, /bbbb/, 'the large one is not');
    } finally {
      await t.request('DELETE', `/workspaces/${id}`);
    }
  });

  test('SERVICE_COMPOSE_BUILD_TIMEOUT is the largest build_timeout a request may ask for', async () => {
    const dir = join(project, 'build-timeout');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { image: REDIS } } }));
    const environment = (buildTimeout: string) => ({ type: 'compose', path: join(dir, 'compose.yaml'), service: 'app', build_timeout: buildTimeout });
    const above = await t.request('POST', '/run', { prompt: 'say: x', container: { environment: environment('3m') } });
    assert.equal(above.status, 400, JSON.stringify(above.body));
    assert.match(above.body.error, /build_timeout: "3m" is above this server's maximum of 2m \(SERVICE_COMPOSE_BUILD_TIMEOUT\)/);
    assert.deepEqual(await stackResourcesOf(t.config.instanceName), { containers: [], volumes: [], networks: [] });
  });

  test('SERVICE_COMPOSE_MAX_STACKS: a stack beyond it is a 503 that leaves nothing; deleting a session makes room', async () => {
    const dir = join(project, 'stacks');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'compose.yaml'), stringify({ services: { app: { image: REDIS } } }));
    const environment = { type: 'compose', path: join(dir, 'compose.yaml'), service: 'app' };
    const first = await t.request('POST', '/run', { prompt: 'say: the one stack', container: { environment } });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const before = await stackResourcesOf(t.config.instanceName);
    const second = await t.request('POST', '/run', { prompt: 'say: a second stack', container: { environment } });
    assert.equal(second.status, 503, JSON.stringify(second.body));
    assert.match(second.body.error, /SERVICE_COMPOSE_MAX_STACKS\b/);
    assert.deepEqual(await stackResourcesOf(t.config.instanceName), before, 'the refused stack left nothing');
    assert.equal((await t.request('DELETE', `/sessions/${first.body.session_id}`)).status, 200);
    const third = await t.request('POST', '/run', { prompt: 'say: room again', container: { environment } });
    assert.equal(third.status, 200, JSON.stringify(third.body));
    assert.equal((await t.request('DELETE', `/sessions/${third.body.session_id}`)).status, 200);
    assert.deepEqual(await stackResourcesOf(t.config.instanceName), { containers: [], volumes: [], networks: [] });
    assert.deepEqual(await t.leftovers(), []);
  });
});
