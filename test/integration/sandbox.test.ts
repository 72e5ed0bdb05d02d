// The sandbox rules against real Podman: refused requests create nothing, allowed mounts behave as asked,
// and lifecycle hooks run inside the container with their arguments taken literally.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, readdir, rm, symlink, writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestBerth, type TestBerth } from '../support/berth.js';

describe('sandbox rules with real mounts', () => {
  let t: TestBerth;
  let root: string;
  let allowed: string;
  let created = 0;

  before(async () => {
    // The allowed tree is a sibling of Berth's own data and session directories, never their parent.
    root = join(process.env.TMPDIR ?? '/tmp', `berth-sandbox-${process.pid}`);
    allowed = join(root, 'allowed');
    await mkdir(join(allowed, 'data'), { recursive: true });
    await writeFile(join(allowed, 'data', 'hello.txt'), 'hello from the host\n');
    await mkdir(join(allowed, 'scratch'), { recursive: true });
    await chmod(join(allowed, 'scratch'), 0o777);
    await symlink('/etc', join(allowed, 'etc-link'));
    t = await startTestBerth({ SERVICE_AGENT_ALLOWED_VOLUMES: allowed });
    const original = t.berth.runtime.createContainer.bind(t.berth.runtime);
    t.berth.runtime.createContainer = async (spec) => {
      // The pool refills in the background: its engines are no request's doing.
      if (!t.berth.pools.ownContainerNames().includes(spec.name)) created++;
      return original(spec);
    };
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t.stop();
    await rm(root, { recursive: true, force: true });
  });

  async function refused(body: object, pattern: RegExp) {
    const before = created;
    const requestSessions = async () => {
      // Listed first, then the pool asked: it names its sessions before their directories exist.
      const entries = await readdir(t.config.agent.sessionsDir);
      const pooled = new Set(t.berth.pools.ownFiles().sessionIds);
      return entries.filter((name) => !pooled.has(name));
    };
    const sessionsBefore = await requestSessions();
    const response = await t.request('POST', '/run', body);
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.status, 'error');
    assert.match(response.body.error, pattern);
    assert.equal(created, before, 'a refused request creates no container');
    assert.deepEqual(await requestSessions(), sessionsBefore, 'a refused request creates no session directory');
  }

  test('a symlink inside an allowed directory that points to /etc is refused', async () => {
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/etc-link:/mnt/etc:ro`] } }, /container\.volumes\[0\]/);
  });

  test('a host path outside the allowlist is refused, and so is a prefix trick', async () => {
    await refused({ prompt: 'hi', container: { volumes: ['/etc:/mnt/etc:ro'] } }, /SERVICE_AGENT_ALLOWED_VOLUMES/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}-evil:/mnt/x`] } }, /SERVICE_AGENT_ALLOWED_VOLUMES/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/../../etc:/mnt/x`] } }, /container\.volumes\[0\]/);
  });

  test('blocked container paths, unsafe options and unsafe workdirs are refused', async () => {
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/data:/etc`] } }, /container\.volumes\[0\]/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/data:/opt/claude`] } }, /container\.volumes\[0\]/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/data:/home/agent/.ssh`] } }, /container\.volumes\[0\]/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/data:/mnt/data:shared`] } }, /shared/);
    await refused({ prompt: 'hi', container: { volumes: [`${allowed}/data:/mnt/data:ro,rw`] } }, /ro/);
    await refused({ prompt: 'hi', workdir: '/work/$(id)' }, /workdir/);
    await refused({ prompt: 'hi', workdir: '/work/../etc' }, /workdir/);
  });

  test('blocked variables, bad names, missing secrets and bad limits are refused', async () => {
    await refused({ prompt: 'hi', container: { secrets_env: { LD_PRELOAD: 'x' } } }, /LD_PRELOAD/);
    await refused({ prompt: 'hi', container: { secrets_env: { '1BAD': 'x' } } }, /1BAD/);
    await refused({ prompt: 'hi', container: { secrets_env: { TOKEN: 'no-such-secret-anywhere' } } }, /no-such-secret-anywhere/);
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`V${i}`, 'x']));
    await refused({ prompt: 'hi', container: { secrets_env: many } }, /50/);
    await refused({ prompt: 'hi', container: { memory: '0m' } }, /container\.memory/);
    await refused({ prompt: 'hi', container: { memory: '512q' } }, /container\.memory/);
    await refused({ prompt: 'hi', container: { timeout: '-5m' } }, /container\.timeout/);
    await refused({ prompt: 'hi', container: { cpus: '1000' } }, /container\.cpus/);
    await refused({ prompt: 'hi', engine: { modle: 'typo' } }, /unknown field "modle"/);
    await refused({ prompt: 'nul \u0000 byte' }, /prompt/);
  });

  test('a missing host path under an allowed directory is a 400 and leaves no container', async () => {
    const response = await t.request('POST', '/run', { prompt: 'hi', container: { volumes: [`${allowed}/not-there:/mnt/x`] } });
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.match(response.body.error, /container\.volumes\[0\]: host path "[^"]*not-there" does not exist/);
  });

  test('an ro mount is readable and read-only inside the container', async () => {
    const response = await t.request('POST', '/run', {
      prompt: ['run: cat /mnt/data/hello.txt', 'run: touch /mnt/data/new 2>/dev/null && echo writable || echo read-only'].join('\n'),
      container: { volumes: [`${allowed}/data:/mnt/data:ro`] },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(response.body.output, 'hello from the host\nread-only');
  });

  test('an rw mount is writable and the file appears on the host', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'run: echo written-in-container > /mnt/scratch/out.txt && echo done',
      container: { volumes: [`${allowed}/scratch:/mnt/scratch`] },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(await readFile(join(allowed, 'scratch', 'out.txt'), 'utf8'), 'written-in-container\n');
  });

  test('lifecycle hooks run before the engine with their arguments taken literally', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'run: cat /workspace/hook.txt',
      container: {
        lifecycle: {
          on_create_command: ['sh', '-c', 'echo created > /workspace/hook.txt'],
          post_start: ['sh', '-c', 'echo "$1" >> /workspace/hook.txt', 'hook', "started; $(id) 'quoted'"],
        },
      },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(response.body.output, "created\nstarted; $(id) 'quoted'");
  });

  test('a failing lifecycle hook stops the run with a 500 that says so', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'say: never reached',
      container: { lifecycle: { post_start: ['sh', '-c', 'echo broken hook >&2; exit 3'] } },
    });
    assert.equal(response.status, 500);
    assert.match(response.body.error, /container\.lifecycle: [\s\S]*broken hook[\s\S]*exit code 3/);
  });

  test('hooks_timeout ends a hook that runs too long', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'say: never reached',
      container: { lifecycle: { post_start: ['sleep', '60'], hooks_timeout: '2s' } },
    });
    assert.equal(response.status, 500);
    assert.match(response.body.error, /exit code 124/);
  });
});
