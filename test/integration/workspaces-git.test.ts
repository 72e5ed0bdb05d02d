// POST /workspaces {"git": …} on a real Berth and real Podman: repositories served over git's smart HTTP
// from this process (test/support/git-server.ts) are cloned by a `workspace-clone` container on the agent
// network. A branch is cloned and read back through the files API (a link in it stays a link the API
// refuses to follow); a private repository is cloned with its password from a Podman secret, which shows
// nowhere: not in the container's inspect data, not in Berth's log, not in the 502 of a remote that echoes
// it. URLs that would make git run a command, read local files or take an option are refused with 400
// naming git.url before any workspace or container exists; a clone that hangs is killed at
// SERVICE_WORKSPACE_CLONE_TIMEOUT, and nothing (containers, workspaces, mounts) is left.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readdir, readFile, readlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { makeRepository, startGitServer, type GitServer } from '../support/git-server.js';
import { mountsAndLoopsOf, rawRequest } from '../support/workspaces.js';
import { removeTestDir } from '../support/test-dir.js';
import type { ContainerSpec } from '../../src/runtime/ports/container-specs.js';
import { INSTANCE_LABEL } from '../../src/runtime/ports/labels.js';
import { WORKSPACE_CLONE_LABEL } from '../../src/core/workspaces/git-clone.js';

const exec = promisify(execFile);

const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
const SECRET = `h4-git-test-${randomBytes(4).toString('hex')}`;
/** Names the test Berth's egress proxy resolves to the git server on loopback (never real hosts). */
const GIT_HOST = 'git.test';
const OTHER_HOST = 'other-git.test';

let t: TestBerth;
let git: GitServer;
let repos: string;
const logLines: string[] = [];
/** Every container spec Berth asked Podman to create for a clone. */
const cloneSpecs: ContainerSpec[] = [];

before(async () => {
  repos = await mkdtemp(join(tmpdir(), 'berth-git-repos-'));
  await makeRepository(repos, 'public', { 'README.md': 'on main\n', 'passwd-link': { symlink: '/etc/passwd' } }, { feature: { 'feature.txt': 'on feature\n' } });
  await makeRepository(repos, 'private', { 'secret.txt': 'private content\n' });
  await makeRepository(repos, 'many', Object.fromEntries(Array.from({ length: 1100 }, (_, i) => [`f/${i}.txt`, `${i}\n`])));
  await exec('sh', ['-c', `printf '%s' "$1" | podman secret create ${SECRET} -`, 'sh', PASSWORD]);
  // An "outside" git host: reached by the clone containers only through Berth's egress proxy.
  git = await startGitServer(
    repos,
    {
      public: {},
      private: { password: PASSWORD },
      echo: { password: PASSWORD, behaviour: 'echo-password' },
      hang: { behaviour: 'hang' },
      many: {},
    },
    GIT_HOST,
  );
  t = await startTestBerth(
    {
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
      SERVICE_WORKSPACE_MAX_BYTES: '64m',
      SERVICE_WORKSPACE_MAX_FILES: '1000',
      SERVICE_WORKSPACE_CLONE_TIMEOUT: '5s',
      // The hanging clone holds the caller's only container slot: a second one meanwhile is refused.
      SERVICE_MAX_CONTAINERS_PER_CALLER: '1',
      SERVICE_LOG_LEVEL: 'debug',
      // Clones may reach the git host and nothing else.
      SERVICE_EGRESS_ALLOWED_HOSTS: git.host,
    },
    { onLog: (record) => logLines.push(JSON.stringify(record)), egressHosts: new Map([[GIT_HOST, '127.0.0.1'], [OTHER_HOST, '127.0.0.1']]) },
  );
  const runtime = t.berth.runtime;
  const create = runtime.createContainer.bind(runtime);
  runtime.createContainer = async (spec) => {
    if (spec.kind === 'workspace-clone') cloneSpecs.push(spec);
    return create(spec);
  };
});

after(async () => {
  await git?.close();
  const dir = t?.dir;
  await t?.stop();
  await exec('podman', ['secret', 'rm', SECRET]).catch(() => undefined);
  assert.ok(!(await exec('podman', ['secret', 'ls', '--format', '{{.Name}}'])).stdout.split('\n').includes(SECRET), 'the test\'s secret is removed');
  if (repos) await removeTestDir(repos);
  if (dir) {
    const { mounts, loops } = await mountsAndLoopsOf(dir);
    assert.deepEqual({ mounts, loops }, { mounts: [], loops: [] }, 'no mount or loop device is left after the stop');
  }
});

const post = (body: unknown) => t.request('POST', '/workspaces', body);
const files = (id: string, path: string) => rawRequest(t.url, 'GET', `/workspaces/${id}/files/${path}`);
const workspaceIds = async () => ((await t.request('GET', '/workspaces')).body.workspaces as { id: string }[]).map((ws) => ws.id).sort();
const diskNames = () => readdir(join(t.config.agent.sessionsDir, '.workspaces')).catch(() => [] as string[]);
/** This Berth's clone containers that exist now. */
const cloneContainers = async () =>
  (await t.berth.runtime.listContainers(`${INSTANCE_LABEL}=${t.config.instanceName}`)).filter((c) => c.labels[WORKSPACE_CLONE_LABEL] !== undefined).map((c) => c.names[0] ?? c.id);

describe('cloning', () => {
  it('clones a branch into a new workspace, files owned like uploads, .git kept, the upload checkpoint taken', async () => {
    const created = await post({ git: { url: git.url('public'), ref: 'feature' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    assert.equal(created.body.source, 'git');
    assert.ok(created.body.file_count > 3, 'the tree and .git are counted');
    const listing = JSON.parse((await files(id, '')).text) as { entries: { name: string; type: string }[] };
    assert.deepEqual(
      listing.entries.map((e) => `${e.name}:${e.type}`).sort(),
      ['.git:directory', 'README.md:file', 'feature.txt:file', 'passwd-link:symlink'],
    );
    assert.equal((await files(id, 'feature.txt')).text, 'on feature\n');
    const head = await files(id, '.git/HEAD');
    assert.equal(head.text, 'ref: refs/heads/feature\n');
    const owner = t.config.agent.usernsBase + t.config.workspaces.fileOwnerUid;
    const onDisk = await lstat(join(t.config.agent.sessionsDir, '.workspaces', id, 'tree', 'feature.txt'));
    assert.deepEqual([onDisk.uid, onDisk.gid, onDisk.mode & 0o7777], [owner, owner, 0o644]);
    const diff = await t.request('GET', `/workspaces/${id}/diff?since=upload`);
    assert.equal(diff.status, 200, JSON.stringify(diff.body));
    assert.deepEqual([diff.body.added, diff.body.changed, diff.body.removed], [[], [], []]);
    assert.deepEqual(await cloneContainers(), [], 'the clone container is removed');
    const spec = cloneSpecs.at(-1)!;
    assert.equal(spec.readOnlyRootfs, true);
    assert.equal(spec.user, `${t.config.workspaces.fileOwnerUid}:${t.config.workspaces.fileOwnerUid}`);
    assert.deepEqual(spec.bindMounts.map((m) => m.containerPath), ['/workspace-tree']);
  });

  it('keeps a link in the repository a link: the files API refuses to follow it to /etc/passwd', async () => {
    const created = await post({ git: { url: git.url('public') } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const link = await lstat(join(t.config.agent.sessionsDir, '.workspaces', id, 'tree', 'passwd-link'));
    assert.ok(link.isSymbolicLink());
    const through = await files(id, 'passwd-link');
    assert.notEqual(through.status, 200);
    assert.ok(through.status >= 400 && through.status < 500, `${through.status} ${through.text}`);
    assert.doesNotMatch(through.text, /root:x:0:0/);
  });

  it('clones a private repository with the password from a Podman secret, as user x-access-token', async () => {
    const created = await post({ git: { url: git.url('private'), secret: SECRET } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await files(created.body.id, 'secret.txt')).text, 'private content\n');
    assert.deepEqual(git.users.get('private')?.filter((user, i, all) => all.indexOf(user) === i), ['x-access-token']);
    const config = (await files(created.body.id, '.git/config')).text;
    assert.doesNotMatch(config, new RegExp(PASSWORD), 'the credential is not kept in the clone');
    const spec = cloneSpecs.at(-1)!;
    assert.deepEqual(spec.secretFiles, [{ secret: SECRET, containerPath: '/run/berth/git-credential' }]);
    assert.doesNotMatch(JSON.stringify(spec), new RegExp(PASSWORD));
  });

  it('a private repository without the secret fails with 502 and git\'s last line, leaving no workspace', async () => {
    const before = await workspaceIds();
    const failed = await post({ git: { url: git.url('private') } });
    assert.equal(failed.status, 502, JSON.stringify(failed.body));
    assert.match(failed.body.error, /^git clone failed: .*(Username|terminal prompts disabled)/);
    assert.deepEqual(await workspaceIds(), before);
    assert.deepEqual(await cloneContainers(), []);
  });

  it('a clone with more entries than SERVICE_WORKSPACE_MAX_FILES is refused with 413 and leaves no workspace', async () => {
    const before = await workspaceIds();
    const full = await post({ git: { url: git.url('many') } });
    assert.equal(full.status, 413, JSON.stringify(full.body));
    assert.match(full.body.error, /more than 1000/);
    assert.deepEqual(await workspaceIds(), before);
  });

  it('a missing branch is a 502 naming it; a missing or reserved secret a 400 naming git.secret', async () => {
    const missing = await post({ git: { url: git.url('public'), ref: 'no-such-branch' } });
    assert.equal(missing.status, 502);
    assert.match(missing.body.error, /no-such-branch/);
    const noSecret = await post({ git: { url: git.url('private'), secret: 'h4-no-such-secret' } });
    assert.equal(noSecret.status, 400);
    assert.match(noSecret.body.error, /^git\.secret: secret "h4-no-such-secret" does not exist/);
    const reserved = await post({ git: { url: git.url('private'), secret: t.config.engine.credentialsSecret } });
    assert.equal(reserved.status, 400);
    assert.match(reserved.body.error, /^git\.secret: .*reserved/);
  });
});

describe('the credential shows nowhere', () => {
  it('a remote that echoes the password gets it redacted from the 502', async () => {
    const failed = await post({ git: { url: git.url('echo'), secret: SECRET } });
    assert.equal(failed.status, 502, JSON.stringify(failed.body));
    assert.match(failed.body.error, /remote error: access denied for password \*\*\*/);
    assert.doesNotMatch(failed.body.error, new RegExp(PASSWORD));
  });

  it('a hanging clone: its live container\'s inspect data holds no password and it follows the policy; killed at the timeout, nothing left', async () => {
    const before = await workspaceIds();
    const disksBefore = await diskNames();
    const started = Date.now();
    const pending = post({ git: { url: git.url('hang'), secret: SECRET } });
    let name: string | undefined;
    for (let i = 0; i < 100 && name === undefined; i++) {
      name = (await cloneContainers())[0];
      if (name === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(name, 'the clone container exists while the clone hangs');
    // Wait for git's request to arrive: the container is running.
    for (let i = 0; i < 100 && (git.requests.get('hang') ?? 0) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    const inspect = (await exec('podman', ['inspect', name])).stdout;
    assert.doesNotMatch(inspect, new RegExp(PASSWORD), 'podman inspect does not show the credential');
    const [info] = JSON.parse(inspect) as [{ Config: { Labels: Record<string, string>; User: string }; HostConfig: { CapDrop: string[]; CapAdd: string[] | null; ReadonlyRootfs: boolean; SecurityOpt: string[]; PidsLimit: number; Memory: number }; State: { Pid: number } }];
    assert.equal(info.Config.Labels['berth.kind'], 'workspace-clone');
    assert.equal(info.HostConfig.ReadonlyRootfs, true);
    const status = await readFile(`/proc/${info.State.Pid}/status`, 'utf8');
    assert.match(status, /^CapEff:\s+0+$/m, 'no capabilities');
    assert.match(status, /^CapBnd:\s+0+$/m);
    assert.match(status, /^NoNewPrivs:\s+1$/m);
    const uidMap = (await readFile(`/proc/${info.State.Pid}/uid_map`, 'utf8')).trim().split(/\s+/).map(Number);
    assert.deepEqual(uidMap, [0, t.config.agent.usernsBase, 65536], 'container root is not host root');
    assert.match(status, new RegExp(`^Uid:\\s+${t.config.agent.usernsBase + t.config.workspaces.fileOwnerUid}\\s`, 'm'), 'git runs as the file owner');
    for (const ns of ['pid', 'ipc', 'uts', 'mnt', 'user']) {
      assert.notEqual(await readlink(`/proc/${info.State.Pid}/ns/${ns}`), await readlink(`/proc/self/ns/${ns}`), `a private ${ns} namespace`);
    }
    assert.equal(info.HostConfig.PidsLimit, t.config.agent.pidsLimit);
    assert.equal(info.HostConfig.Memory, t.config.agent.defaultMemoryBytes);
    const treeMount = (await readFile(`/proc/${info.State.Pid}/mountinfo`, 'utf8')).split('\n').find((line) => line.split(' ')[4] === '/workspace-tree');
    assert.ok(treeMount, 'the tree is mounted');
    assert.match(treeMount.split(' ')[5]!, /(^|,)nosuid(,|$)/);
    assert.match(treeMount.split(' ')[5]!, /(^|,)nodev(,|$)/);
    const mounted = (await readFile(`/proc/${info.State.Pid}/mountinfo`, 'utf8')).split('\n').map((line) => line.split(' ')[4]);
    assert.ok(!mounted.includes('/opt/claude'), 'no engine mount');
    // The caller's one container slot is the clone's.
    const second = await post({ git: { url: git.url('public') } });
    assert.equal(second.status, 429, JSON.stringify(second.body));
    const failed = await pending;
    const tookMs = Date.now() - started;
    assert.equal(failed.status, 502, JSON.stringify(failed.body));
    assert.match(failed.body.error, /did not finish within 5 s \(SERVICE_WORKSPACE_CLONE_TIMEOUT\)/);
    assert.ok(tookMs < 20_000, `answered ${tookMs} ms after the request`);
    assert.deepEqual(await cloneContainers(), [], 'the container is removed');
    assert.deepEqual(await workspaceIds(), before, 'no workspace is left');
    assert.deepEqual(await diskNames(), disksBefore, 'no disk is left');
  });

  it('Berth\'s log never holds the password', () => {
    assert.ok(logLines.length > 0);
    assert.equal(logLines.filter((line) => line.includes(PASSWORD)).length, 0);
    assert.ok(logLines.some((line) => line.includes('git clone into a workspace failed')), 'clones are logged (without the credential)');
  });
});

describe('attacks refused before anything exists', () => {
  const urls: [string, string][] = [
    ['ext:: runs a command', 'ext::sh -c touch% /tmp/berth-h4-pwned'],
    ['ext:: without spaces', 'ext::sh'],
    ['file:// reads local files', 'file:///etc'],
    ['a local path', '/etc'],
    ['fd:: talks to descriptors', 'fd::0'],
    ['an option', '--upload-pack=touch /tmp/berth-h4-pwned'],
    ['an option without spaces', '-uhttp://x/y'],
    ['a newline', `${'http://example.com/a.git'}\n--upload-pack=touch /tmp/berth-h4-pwned`],
    ['a password in the URL', 'https://user:hunter2@example.com/repo.git'],
    ['scp-like syntax', 'git@example.com:repo.git'],
    ['an uppercase transport', 'EXT::sh'],
    ['a backslash', 'http://example.com\\@evil/repo.git'],
    // Raw TCP transports cannot pass the egress proxy, the clone's only way out.
    ['ssh (raw TCP, no way through the proxy)', 'ssh://git@example.com/repo.git'],
    ['git:// (raw TCP)', 'git://example.com/repo.git'],
    // The clone's host must be among SERVICE_EGRESS_ALLOWED_HOSTS (here: the git host only).
    ['a host the server does not allow', `http://${OTHER_HOST}:80/repo.git`],
  ];
  for (const [what, url] of urls) {
    it(`git.url: ${what}`, async () => {
      const before = { workspaces: await workspaceIds(), disks: await diskNames(), specs: cloneSpecs.length };
      const refused = await post({ git: { url } });
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      assert.match(refused.body.error, /^git\.url: /);
      assert.equal(refused.body.status, 'error');
      assert.deepEqual({ workspaces: await workspaceIds(), disks: await diskNames(), specs: cloneSpecs.length }, before, 'no workspace, disk or container');
      assert.equal(existsSync('/tmp/berth-h4-pwned'), false);
    });
  }

  for (const ref of ['--upload-pack=touch /tmp/berth-h4-pwned', '../../etc', 'a..b', 'x\ny', 'refs/heads/x.lock', 'a b', '@{-1}']) {
    it(`git.ref: ${JSON.stringify(ref)}`, async () => {
      const specs = cloneSpecs.length;
      const refused = await post({ git: { url: git.url('public'), ref } });
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      assert.match(refused.body.error, /^git\.ref: /);
      assert.equal(cloneSpecs.length, specs);
    });
  }
});

describe('Berth\'s stop', () => {
  it('kills a clone in flight: the request answers 503 at once, no container is left (and no mount: after())', async () => {
    const pending = post({ git: { url: git.url('hang') } });
    let name: string | undefined;
    for (let i = 0; i < 100 && name === undefined; i++) {
      name = (await cloneContainers())[0];
      if (name === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(name, 'the clone container exists');
    const stopping = Date.now();
    await t.stop();
    const stoppedMs = Date.now() - stopping;
    const answer = await pending;
    // The answer let out during the close does not keep its connection (and the close) open.
    assert.ok(stoppedMs < 20_000, `the stop took ${stoppedMs} ms`);
    // Not the timeout's 502: the stop ended it.
    assert.equal(answer.status, 503, JSON.stringify(answer.body));
    assert.match(answer.body.error, /shutting down/i);
    const { stdout } = await exec('podman', ['ps', '-a', '--filter', `label=${INSTANCE_LABEL}=${t.config.instanceName}`, '--format', '{{.Names}}']);
    assert.equal(stdout.trim(), '', 'no container of the instance is left');
  });
});
