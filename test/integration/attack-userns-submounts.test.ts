// Attacks on the host's files through mounts, performed against a real Berth on real Podman:
//  - finding 2: a run as root in its image plants a setuid-root shell in a writable allowed tree;
//  - finding 7: `ro` (and nosuid/nodev) must hold below the mounted directory, also for submounts.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const ROOT_IMAGE = 'localhost/berth-test-root:latest';

describe('attacks through mounted host trees', () => {
  let t: TestBerth;
  let root: string;
  let allowed: string;

  before(async () => {
    root = join(process.env.TMPDIR ?? '/tmp', `berth-attack-mounts-${process.pid}`);
    allowed = join(root, 'allowed');
    await mkdir(join(allowed, 'w'), { recursive: true });
    await chmod(join(allowed, 'w'), 0o777);
    // A tmpfs mounted below an allowed directory: writable on the host, and it must not be from a container.
    await mkdir(join(allowed, 'ro-tree', 'sub'), { recursive: true });
    await exec('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0777', 'berth-test-tmpfs', join(allowed, 'ro-tree', 'sub')]);
    await writeFile(join(allowed, 'ro-tree', 'sub', 'inside-tmpfs.txt'), 'tmpfs content\n');
    t = await startTestBerth({ SERVICE_AGENT_ALLOWED_VOLUMES: allowed });
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
  });
  after(async () => {
    await t?.stop();
    await exec('umount', [join(allowed, 'ro-tree', 'sub')]).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  });

  test('root in the image is not root on the host: a planted setuid shell belongs to an unprivileged uid', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'run: cp /bin/bash /w/sh && chmod 4755 /w/sh && id -u && cat /proc/self/uid_map',
      container: { image: ROOT_IMAGE, volumes: [`${allowed}/w:/w`] },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const [uid, uidMap] = response.body.output.split('\n');
    assert.equal(uid, '0', 'the attacker is root inside its container');
    assert.match(uidMap, new RegExp(`^\\s*0\\s+${t.config.agent.usernsBase}\\s+65536$`), 'in a user namespace that maps it elsewhere');
    const planted = await stat(join(allowed, 'w', 'sh'));
    assert.equal(planted.uid, t.config.agent.usernsBase, 'the file belongs to the mapped uid, not to host root');
    assert.notEqual(planted.uid, 0);
    assert.notEqual(planted.gid, 0);
    // Whatever bits it kept, running it on the host gives the mapped uid, never root.
    const { stdout } = await exec(join(allowed, 'w', 'sh'), ['-p', '-c', 'id -u'], { uid: 65534, gid: 65534 }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    assert.notEqual(stdout.trim(), '0', 'the planted shell does not give root');
  });

  test('the default image writes host files as the mapped agent uid', async () => {
    const response = await t.request('POST', '/run', {
      prompt: 'run: echo mine > /w/agent.txt && echo ok',
      container: { volumes: [`${allowed}/w:/w`] },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal((await stat(join(allowed, 'w', 'agent.txt'))).uid, t.config.agent.usernsBase + 1000);
  });

  test('a read-only tree stays read-only below it: a submount is not carried into the container', async () => {
    const response = await t.request('POST', '/run', {
      prompt: [
        'run: ls /ro/sub | wc -l',
        'run: (echo x > /ro/sub/escape.txt && echo WRITABLE) 2>/dev/null || echo refused',
        'run: (echo x > /ro/top.txt && echo WRITABLE) 2>/dev/null || echo refused',
      ].join('\n'),
      container: { volumes: [`${allowed}/ro-tree:/ro:ro`] },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual(response.body.output.split('\n'), ['0', 'refused', 'refused']);
    await assert.rejects(stat(join(allowed, 'ro-tree', 'sub', 'escape.txt')), 'nothing reached the tmpfs');
    assert.equal(await readFile(join(allowed, 'ro-tree', 'sub', 'inside-tmpfs.txt'), 'utf8'), 'tmpfs content\n');
  });
});
