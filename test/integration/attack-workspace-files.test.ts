// Attacks on the workspace files API against a real Berth (rootful Podman, real loop disks): a caller's path
// that tries to leave the tree, links and FIFOs a run planted in the tree, a directory swapped for a link
// while downloads run, and another caller's token. Each must fail to do harm: nothing outside the tree is
// read or written, nothing blocks, and another caller's workspace does not exist for them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { lchown, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startBerthWithCallers } from '../support/callers.js';
import type { TestBerth } from '../support/berth.js';
import { asRun, leftAfterStop, rawRequest } from '../support/workspaces.js';

const exec = promisify(execFile);

let t: TestBerth;
let as: (name: 'alice' | 'mallory') => Record<string, string>;
let canary: string;
let id: string;
const CANARY_TEXT = 'host file: must never be read, changed or removed through a workspace';

before(async () => {
  ({ t, as } = await startBerthWithCallers(['alice', 'mallory'], { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', SERVICE_WORKSPACE_MAX_BYTES: '64m' }));
  canary = await mkdtemp(join(tmpdir(), 'berth-canary-'));
  await writeFile(join(canary, 'secret'), CANARY_TEXT);
  const created = await t.request('POST', '/workspaces', {}, as('alice'));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  id = created.body.id;
  // What a run leaves behind: links to host places, a FIFO, as the container's user (mapped uid).
  const owner = t.config.agent.usernsBase + t.config.workspaces.fileOwnerUid;
  await asRun(t, 'alice', id, async (tree) => {
    await symlink('/etc', join(tree, 'etc-link'));
    await symlink(canary, join(tree, 'canary-dir'));
    await symlink(join(canary, 'secret'), join(tree, 'canary-file'));
    await exec('mkfifo', [join(tree, 'fifo')]);
    await mkdir(join(tree, 'inside'));
    await writeFile(join(tree, 'inside', 'passwd'), 'inside the workspace');
    for (const name of ['etc-link', 'canary-dir', 'canary-file', 'fifo', 'inside', 'inside/passwd']) await lchown(join(tree, name), owner, owner);
  });
});

after(async () => {
  if (t) {
    await t.berth.stop();
    const left = await leftAfterStop(t.dir);
    await t.stop();
    assert.deepEqual(left, { mounts: [], loops: [] }, 'no workspace disk or view is left mounted after the stop');
  }
  if (canary) await rm(canary, { recursive: true, force: true });
});

async function canaryUntouched(): Promise<void> {
  assert.deepEqual(await readdir(canary), ['secret']);
  assert.equal(await readFile(join(canary, 'secret'), 'utf8'), CANARY_TEXT);
}

const files = (path: string) => `/workspaces/${id}/files/${path}`;

describe('paths that try to leave the tree', () => {
  const attempts = ['../../../../etc/passwd', '..', 'inside/../../x', '%2e%2e/%2e%2e/etc/passwd', '%2E%2E%2F%2E%2E%2Fetc%2Fpasswd', '%2Fetc%2Fpasswd', '/etc/passwd', 'inside%00passwd', 'a/./b', 'inside//passwd'];

  it('GET, PUT and DELETE refuse each with 400 naming the path, and nothing outside is read or written', async () => {
    for (const path of attempts) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const answer = await rawRequest(t.url, method, files(path), { headers: as('alice'), ...(method === 'PUT' ? { body: 'planted' } : {}) });
        assert.equal(answer.status, 400, `${method} ${path}: ${answer.status} ${answer.text}`);
        assert.match(JSON.parse(answer.text).error, /^path: /, `${method} ${path}`);
        assert.doesNotMatch(answer.text, /root:x:0:0/);
      }
    }
    await assert.rejects(readFile('/etc/x'), { code: 'ENOENT' });
    await canaryUntouched();
  });
});

describe('links a run planted', () => {
  it('a link to /etc is neither followed by GET nor listed as anything but a link', async () => {
    for (const path of ['etc-link/passwd', 'etc-link', 'etc-link/', 'canary-dir/secret', 'canary-file']) {
      const answer = await rawRequest(t.url, 'GET', files(path), { headers: as('alice') });
      assert.equal(answer.status, 400, `GET ${path}: ${answer.text}`);
      assert.match(answer.text, /symbolic link/);
      assert.doesNotMatch(answer.text, /root:x:0:0|must never be read/);
    }
    const root = await rawRequest(t.url, 'GET', `/workspaces/${id}/files`, { headers: as('alice') });
    const entries = Object.fromEntries(JSON.parse(root.text).entries.map((entry: { name: string; type: string }) => [entry.name, entry.type]));
    assert.deepEqual(entries, { 'canary-dir': 'symlink', 'canary-file': 'symlink', 'etc-link': 'symlink', fifo: 'other', inside: 'directory' });
  });

  it('PUT through a link, or onto one, writes nothing outside the tree', async () => {
    for (const path of ['canary-dir/secret', 'canary-dir/new', 'canary-file', 'etc-link/berth-planted']) {
      const answer = await rawRequest(t.url, 'PUT', files(path), { headers: as('alice'), body: 'overwritten' });
      assert.equal(answer.status, 400, `PUT ${path}: ${answer.text}`);
    }
    await assert.rejects(readFile('/etc/berth-planted'), { code: 'ENOENT' });
    await canaryUntouched();
  });

  it('DELETE through a link is refused; deleting the link itself removes only the link', async () => {
    const through = await rawRequest(t.url, 'DELETE', files('canary-dir/secret'), { headers: as('alice') });
    assert.equal(through.status, 400, through.text);
    await canaryUntouched();
    const link = await rawRequest(t.url, 'DELETE', files('canary-file'), { headers: as('alice') });
    assert.equal(link.status, 200, link.text);
    await canaryUntouched();
  });

  it('a FIFO is refused at once instead of blocking the download', async () => {
    const started = Date.now();
    const answer = await rawRequest(t.url, 'GET', files('fifo'), { headers: as('alice'), timeoutMs: 5_000 });
    assert.equal(answer.status, 400, answer.text);
    assert.match(answer.text, /not a regular file or directory/);
    assert.ok(Date.now() - started < 2_000, `answered in ${Date.now() - started} ms`);
  });
});

describe('what a real run plants', () => {
  it('links, a FIFO and a setuid file written by a run\'s container are listed for what they are and never followed', async () => {
    const run = await t.request(
      'POST',
      '/run',
      { prompt: 'run: ln -s /etc run-etc && ln -s /etc/passwd run-passwd && mkfifo run-fifo && cp /bin/true run-suid && chmod 4755 run-suid && echo planted', workspace: id },
      as('alice'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.match(run.body.output, /planted/);
    const root = JSON.parse((await rawRequest(t.url, 'GET', `/workspaces/${id}/files`, { headers: as('alice') })).text);
    const entries = Object.fromEntries(root.entries.map((entry: { name: string; type: string; mode: number }) => [entry.name, [entry.type, entry.mode]]));
    assert.deepEqual(entries['run-etc']?.[0], 'symlink');
    assert.deepEqual(entries['run-fifo']?.[0], 'other');
    assert.deepEqual(entries['run-suid'], ['file', 0o755], 'listings show permission bits only, never setuid');
    for (const path of ['run-etc/passwd', 'run-etc/', 'run-passwd', 'run-fifo']) {
      const started = Date.now();
      const answer = await rawRequest(t.url, 'GET', files(path), { headers: as('alice'), timeoutMs: 5_000 });
      assert.equal(answer.status, 400, `GET ${path}: ${answer.text}`);
      assert.doesNotMatch(answer.text, /root:x:0:0/);
      assert.ok(Date.now() - started < 2_000, `GET ${path} answered in ${Date.now() - started} ms`);
    }
    const through = await rawRequest(t.url, 'PUT', files('run-etc/berth-planted'), { headers: as('alice'), body: 'x' });
    assert.equal(through.status, 400, through.text);
    await assert.rejects(readFile('/etc/berth-planted'), { code: 'ENOENT' });
  });
});

describe('a directory swapped for a link while downloads run', () => {
  it('every GET reads the file inside the tree or is refused; none reads the host file', async () => {
    const answers = await asRun(t, 'alice', id, async (tree) => {
      await writeFile(join(canary, 'passwd'), CANARY_TEXT);
      await symlink(canary, join(tree, 'swap-link'));
      // The run's side: `inside` and the link change places as fast as renames go.
      const swapper = spawn('python3', ['-c', `
import os, time
os.chdir(${JSON.stringify(tree)})
end = time.time() + 4
while time.time() < end:
    os.rename('inside', 'inside-real'); os.rename('swap-link', 'inside')
    os.rename('inside', 'swap-link'); os.rename('inside-real', 'inside')
`]);
      const exited = new Promise<number | null>((resolve) => swapper.on('exit', resolve));
      const seen: { status: number; text: string }[] = [];
      const deadline = Date.now() + 3_500;
      while (Date.now() < deadline) {
        const batch = await Promise.all(Array.from({ length: 8 }, () => rawRequest(t.url, 'GET', files('inside/passwd'), { headers: as('alice') })));
        seen.push(...batch.map((answer) => ({ status: answer.status, text: answer.text })));
      }
      assert.equal(await exited, 0, 'the swapper ran to its end');
      return seen;
    });
    await rm(join(canary, 'passwd'));
    const statuses = new Map<number, number>();
    for (const answer of answers) {
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      assert.doesNotMatch(answer.text, /must never be read/, 'a GET read the host file through the swapped-in link');
      if (answer.status === 200) assert.equal(answer.text, 'inside the workspace');
      else assert.ok([400, 404].includes(answer.status), `${answer.status} ${answer.text}`);
    }
    assert.ok((statuses.get(400) ?? 0) + (statuses.get(404) ?? 0) > 0, `the race was hit: ${JSON.stringify([...statuses])}`);
    assert.ok(answers.length >= 40, `${answers.length} GETs`);
  });
});

describe('another caller', () => {
  it('gets 404 for every route of a workspace it does not own, and changes nothing', async () => {
    const routes: [string, string, string?][] = [
      ['GET', `/workspaces/${id}`],
      ['DELETE', `/workspaces/${id}`],
      ['GET', `/workspaces/${id}/files`],
      ['GET', `/workspaces/${id}/files/`],
      ['GET', files('inside/passwd')],
      ['PUT', files('inside/passwd'), 'hijacked'],
      ['DELETE', files('inside/passwd')],
      ['DELETE', files('inside')],
      ['GET', `/workspaces/${id}/archive`],
      ['POST', `/workspaces/${id}/archive`, 'not a tarball'],
      ['GET', `/workspaces/${id}/diff?since=last_run`],
    ];
    for (const [method, path, body] of routes) {
      const answer = await rawRequest(t.url, method, path, { headers: { ...as('mallory'), ...(body ? { 'content-type': 'application/octet-stream' } : {}) }, ...(body ? { body } : {}) });
      assert.equal(answer.status, 404, `${method} ${path}: ${answer.status} ${answer.text}`);
      assert.match(answer.text, new RegExp(`workspace ${id} not found`));
    }
    const listed = await t.request('GET', '/workspaces', undefined, as('mallory'));
    assert.deepEqual(listed.body, { workspaces: [] });
    const still = await rawRequest(t.url, 'GET', files('inside/passwd'), { headers: as('alice') });
    assert.equal(still.text, 'inside the workspace');
  });
});

describe('a workspace a run holds', () => {
  it('cannot be deleted or written through the API (409) until the run gives it back', async () => {
    const lease = await t.berth.workspaces.acquire('alice', id, { kind: 'run', id: 'run-attack-busy' });
    try {
      assert.equal((await t.request('DELETE', `/workspaces/${id}`, undefined, as('alice'))).status, 409);
      assert.equal((await rawRequest(t.url, 'PUT', files('x'), { headers: as('alice'), body: 'x' })).status, 409);
      assert.equal((await rawRequest(t.url, 'DELETE', files('inside'), { headers: as('alice') })).status, 409);
      assert.equal((await rawRequest(t.url, 'GET', files('inside/passwd'), { headers: as('alice') })).status, 200, 'reads go on');
      assert.equal((await t.request('GET', `/workspaces/${id}`, undefined, as('alice'))).body.in_use, true);
    } finally {
      await lease.release();
    }
    assert.equal((await t.request('DELETE', `/workspaces/${id}`, undefined, as('alice'))).status, 200);
    assert.equal((await t.request('GET', `/workspaces/${id}`, undefined, as('alice'))).status, 404);
  });
});
