// What `berth push` (the SDK's uploadDirectory) puts into the archive it uploads: git's view of the
// directory (.gitignore files at every level with git's precedence, .git/info/exclude, .git itself left out
// unless asked), and nothing Berth would refuse (links pointing outside, FIFOs, hard links, setuid bits).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import { list, type ReadEntry } from 'tar';
import { packDirectory, planDirectory, type PackOptions } from '../../packages/client/src/pack-directory.js';

interface Listed {
  readonly type: string;
  readonly mode: number;
  readonly linkpath?: string;
  readonly uid?: number;
  readonly uname?: string;
}

/** The entries of the archive packDirectory makes of `dir`, by path. */
async function packed(dir: string, options: PackOptions = {}): Promise<Map<string, Listed>> {
  const plan = await planDirectory(dir, options);
  const file = join(archives, `${count++}.tgz`);
  await pipeline(packDirectory(plan), createWriteStream(file));
  const entries = new Map<string, Listed>();
  await list({
    file,
    onReadEntry: (entry: ReadEntry) => {
      entries.set(entry.path.replace(/\/$/, ''), { type: entry.type, mode: entry.mode ?? 0, linkpath: entry.linkpath, uid: entry.uid, uname: entry.uname });
    },
  });
  return entries;
}

let archives: string;
let count = 0;

describe('the archive berth push uploads', () => {
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-push-'));
    archives = await mkdtemp(join(tmpdir(), 'berth-push-archives-'));
    const write = async (path: string, text = path) => {
      await mkdir(join(dir, path, '..'), { recursive: true });
      await writeFile(join(dir, path), text);
    };
    await write('.gitignore', 'node_modules/\n*.log\n/build\n');
    await write('calc.js');
    await write('node_modules/x/index.js');
    await write('debug.log');
    await write('build/out.js');
    await write('src/build/kept.js'); // `/build` is anchored at the root
    await write('src/.gitignore', '!keep.log\nsecret.txt\n');
    await write('src/keep.log');
    await write('src/other.log');
    await write('src/secret.txt');
    await write('src/deep/secret.txt'); // a .gitignore pattern without a slash matches at any depth below it
    await write('.git/HEAD', 'ref: refs/heads/main\n');
    await write('.git/info/exclude', 'local-only.txt\n');
    await write('local-only.txt');
    await write('@scoped.txt');
    await write('tmp/scratch.txt');
    await symlink('calc.js', join(dir, 'inside-link'));
    await symlink('../../etc/passwd', join(dir, 'src', 'outside-link'));
    await symlink('/etc/passwd', join(dir, 'absolute-link'));
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    await write('tool.sh', '#!/bin/sh\n');
    await chmod(join(dir, 'tool.sh'), 0o4755);
    await link(join(dir, 'calc.js'), join(dir, 'hard-link.js'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(archives, { recursive: true, force: true });
  });

  it('leaves out what .gitignore files ignore, with git precedence between levels', async () => {
    const entries = await packed(dir);
    for (const path of ['calc.js', '.gitignore', 'src/build/kept.js', 'src/keep.log', '@scoped.txt', 'tmp/scratch.txt']) assert.ok(entries.has(path), `${path} is packed`);
    for (const path of ['node_modules', 'node_modules/x/index.js', 'debug.log', 'build', 'build/out.js', 'src/other.log', 'src/secret.txt', 'src/deep/secret.txt']) {
      assert.ok(!entries.has(path), `${path} is ignored`);
    }
  });

  it('honours .git/info/exclude and leaves .git out unless asked for', async () => {
    const entries = await packed(dir);
    assert.ok(!entries.has('local-only.txt'));
    assert.ok(![...entries.keys()].some((path) => path === '.git' || path.startsWith('.git/')));
    const withGit = await packed(dir, { includeGit: true });
    assert.ok(withGit.has('.git/HEAD'));
  });

  it('can ignore nothing from .gitignore, or more by extra patterns', async () => {
    const all = await packed(dir, { gitignore: false });
    assert.ok(all.has('node_modules/x/index.js'));
    assert.ok(all.has('local-only.txt'));
    const fewer = await packed(dir, { ignore: ['tmp/', '*.js'] });
    assert.ok(!fewer.has('tmp/scratch.txt'));
    assert.ok(!fewer.has('calc.js'));
    assert.ok(fewer.has('@scoped.txt'), 'a name starting with @ is a file, not an archive to copy from');
  });

  it('keeps links inside as links and reports what Berth would refuse instead of sending it', async () => {
    const skipped: string[] = [];
    const entries = await packed(dir, { onSkip: (path) => skipped.push(path) });
    assert.deepEqual(entries.get('inside-link')?.type, 'SymbolicLink');
    assert.equal(entries.get('inside-link')?.linkpath, 'calc.js');
    assert.deepEqual(skipped.sort(), ['absolute-link', 'pipe', 'src/outside-link']);
    for (const path of skipped) assert.ok(!entries.has(path));
  });

  it('stores hard links as files, drops setuid bits and records no owner', async () => {
    const entries = await packed(dir);
    assert.equal(entries.get('hard-link.js')?.type, 'File');
    assert.equal(entries.get('calc.js')?.type, 'File');
    assert.equal((entries.get('tool.sh')!.mode & 0o7000), 0);
    assert.equal(entries.get('tool.sh')!.mode & 0o777, 0o755);
    for (const [path, entry] of entries) {
      assert.ok(!entry.uid, `${path} records no uid`);
      assert.ok(!entry.uname, `${path} records no user name`);
    }
  });
});
