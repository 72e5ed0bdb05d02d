// Issue 24's "Done when", run as a remote caller would: from a fresh directory that shares nothing with
// Berth's host paths, with the berth command alone (logged in with an API token, authentication on), push a
// small repository whose test fails, let a run fix it through the offline model's `run:` directives, read
// the change with `berth diff`, bring the files back with `berth pull` (the test now passes there), and
// resume the session: its next run sees the fixed file. Then the SDK's workspace calls against the same
// Berth: streamed upload and download, ranges, listings, archive round trip, diff, and another caller's 404.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Berth, BerthError } from '../../packages/client/src/index.js';
import { startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const BERTH = resolve(import.meta.dirname, '../../packages/cli/bin/berth.js');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const API_TOKEN = randomBytes(24).toString('hex');
const OTHER_TOKEN = randomBytes(24).toString('hex');

const BUGGY = 'exports.add = (a, b) => a - b;\n';
const FIXED = 'exports.add = (a, b) => a + b;\n';
const TEST = "const { add } = require('./calc');\nif (add(2, 3) !== 5) { console.error('add(2, 3) is ' + add(2, 3)); process.exit(1); }\nconsole.log('ok');\n";

async function collect(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  return Buffer.from(await new Response(stream).arrayBuffer());
}

describe('workspaces from a remote caller', { timeout: 600_000 }, () => {
  let t: TestBerth;
  /** The caller's machine: its repository, its pulled copy and its berth configuration, nothing of Berth's. */
  let home: string;
  let repo: string;

  /** Runs `berth ARGS` in the caller's repository as a user would; answers stdout and stderr. */
  async function berth(...args: string[]): Promise<{ stdout: string; stderr: string }> {
    try {
      return await exec(process.execPath, [BERTH, ...args], {
        cwd: repo,
        env: { PATH: process.env.PATH, HOME: home, BERTH_URL: t.url, BERTH_CONFIG_DIR: join(home, '.config', 'berth'), NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
      });
    } catch (error) {
      const failed = error as Error & { stdout?: string; stderr?: string };
      throw new Error(`berth ${args.join(' ')} failed: ${failed.stderr ?? failed.message}`);
    }
  }

  before(async () => {
    t = await startTestBerth({
      SERVICE_AUTH_ENABLED: 'true',
      SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
      SERVICE_API_TOKENS: `ada:${API_TOKEN},eve:${OTHER_TOKEN}`,
      SERVICE_POOL_SIZE: '1',
      SERVICE_WORKSPACE_MAX_BYTES: '64m',
      SERVICE_AGENT_POOL_SIZE: '0',
    });
    home = await mkdtemp(join(tmpdir(), 'remote-caller-'));
    assert.ok(!home.startsWith(t.dir) && !t.dir.startsWith(home), "the caller's directory shares nothing with Berth's");
    repo = join(home, 'calc');
    await mkdir(join(repo, 'node_modules', 'x'), { recursive: true });
    await writeFile(join(repo, 'calc.js'), BUGGY);
    await writeFile(join(repo, 'test.js'), TEST);
    await writeFile(join(repo, '.gitignore'), 'node_modules/\n');
    await writeFile(join(repo, 'node_modules', 'x', 'index.js'), 'must not be uploaded\n');
    await berth('login', '--token', API_TOKEN);
  });

  after(async () => {
    try {
      assert.deepEqual(await t?.leftovers(), []);
    } finally {
      await t?.stop();
      if (home) await rm(home, { recursive: true, force: true });
    }
  });

  let workspace: string;
  let session: string;

  it("the repository's test fails before any run", async () => {
    await assert.rejects(exec(process.execPath, ['test.js'], { cwd: repo }), /add\(2, 3\) is -1/);
  });

  it('berth push prints the new workspace id and uploads what git would (not node_modules)', async () => {
    const { stdout, stderr } = await berth('push', '.');
    workspace = stdout.trim();
    assert.match(workspace, UUID, `stdout is the id alone: ${stdout}`);
    assert.match(stderr, /3 files/, stderr);
    const listed = await berth('workspaces', 'files', workspace, '--output', 'json');
    const names = (JSON.parse(listed.stdout) as { entries: { name: string }[] }).entries.map((e) => e.name).sort();
    assert.deepEqual(names, ['.gitignore', 'calc.js', 'test.js']);
    const shown = JSON.parse((await berth('workspaces', 'show', workspace, '--output', 'json')).stdout);
    assert.equal(shown.source, 'upload');
    assert.equal(shown.file_count, 3);
  });

  it('berth run --workspace runs with the files at its workdir; its run: directives fix the bug', async () => {
    const prompt = ['run: cat calc.js', "run: sed -i 's/a - b/a + b/' calc.js", 'run: cat calc.js'].join('\n');
    const { stdout } = await berth('run', '--json', '--workspace', workspace, prompt);
    const answer = JSON.parse(stdout);
    assert.equal(answer.status, 'completed', stdout);
    assert.ok(answer.output.includes('a - b') && answer.output.includes('a + b'), answer.output);
    session = answer.session_id;
    assert.match(session, UUID);
  });

  it('berth diff shows the change the run made', async () => {
    const { stdout } = await berth('diff', workspace);
    assert.match(stdout, /^--- .*calc\.js/m, stdout);
    assert.match(stdout, /^\+\+\+ .*calc\.js/m);
    assert.match(stdout, /^-exports\.add = \(a, b\) => a - b;$/m);
    assert.match(stdout, /^\+exports\.add = \(a, b\) => a \+ b;$/m);
    // The diff applies to the caller's own copy: `berth diff ID | git apply` brings the change home.
    const copy = join(home, 'applied');
    await cp(repo, copy, { recursive: true });
    const patched = spawnSync('git', ['apply'], { cwd: copy, input: stdout, encoding: 'utf8' });
    assert.equal(patched.status, 0, patched.stderr);
    assert.equal(await readFile(join(copy, 'calc.js'), 'utf8'), FIXED);
    const summary = JSON.parse((await berth('diff', workspace, '--output', 'json')).stdout);
    assert.deepEqual(summary.changed, ['calc.js']);
    assert.deepEqual([summary.added, summary.removed], [[], []]);
    const sinceUpload = JSON.parse((await berth('diff', workspace, '--since', 'upload', '--output', 'json')).stdout);
    assert.deepEqual(sinceUpload.changed, ['calc.js']);
  });

  it('berth pull brings the fixed files back, and the test passes there', async () => {
    const out = join(home, 'out');
    await berth('pull', workspace, out);
    assert.equal(await readFile(join(out, 'calc.js'), 'utf8'), FIXED);
    assert.deepEqual((await readdir(out)).sort(), ['.gitignore', 'calc.js', 'test.js']);
    const { stdout } = await exec(process.execPath, ['test.js'], { cwd: out });
    assert.equal(stdout, 'ok\n');
    await assert.rejects(berth('pull', workspace, out), /not empty/, 'a pull never overwrites a directory with files');
  });

  it('a second run resuming the session sees the fixed file', async () => {
    const { stdout } = await berth('run', '--json', '--resume', session, 'run: cat calc.js');
    const answer = JSON.parse(stdout);
    assert.equal(answer.status, 'completed', stdout);
    assert.ok(answer.output.includes('a + b'), answer.output);
    assert.equal(answer.session_id, session);
    // Streamed (GET /run/stream): resumed, and as a new session given the workspace.
    assert.match((await berth('run', '--resume', session, 'run: cat calc.js')).stdout, /a \+ b/);
    assert.match((await berth('run', '--workspace', workspace, 'run: cat test.js')).stdout, /add\(2, 3\)/);
  });

  it('an agent spawned with --workspace holds it: rm is refused until the agent is gone', async () => {
    const agent = JSON.parse((await berth('agents', 'spawn', '--workspace', workspace, '--output', 'json')).stdout);
    try {
      assert.equal(JSON.parse((await berth('workspaces', 'show', workspace, '--output', 'json')).stdout).in_use, true);
      await assert.rejects(berth('workspaces', 'rm', workspace), /\(HTTP 409\)/);
    } finally {
      await berth('agents', 'rm', agent.id);
    }
  });

  it('berth workspaces lists it; rm deletes it', async () => {
    const { stdout } = await berth('workspaces', 'ls', '--output', 'json');
    assert.ok((JSON.parse(stdout).workspaces as { id: string }[]).some((w) => w.id === workspace));
    await berth('sessions', 'rm', session);
    await berth('workspaces', 'rm', workspace);
    await assert.rejects(berth('workspaces', 'show', workspace), /not found \(HTTP 404\)/);
  });

  it("a push larger than the workspace limit prints Berth's 413 and leaves no workspace behind", async () => {
    const large = join(home, 'large');
    await mkdir(large);
    await writeFile(join(large, 'random.bin'), randomBytes(70 * 1024 * 1024));
    const before = JSON.parse((await berth('workspaces', 'ls', '--output', 'json')).stdout).workspaces.length;
    await assert.rejects(berth('push', large), /is full: .*\(HTTP 413\)/);
    const after = JSON.parse((await berth('workspaces', 'ls', '--output', 'json')).stdout).workspaces.length;
    assert.equal(after, before, 'the workspace push created was deleted again');
    await rm(large, { recursive: true });
  });

  describe('the SDK', () => {
    let sdk: Berth;
    let id: string;

    before(async () => {
      sdk = new Berth({ url: t.url, apiToken: API_TOKEN });
      id = (await sdk.workspaces.create()).id;
    });
    after(async () => {
      if (id) await sdk.workspaces.delete(id);
    });

    it('uploads a string, bytes and a stream, and downloads them back (also a range)', async () => {
      await sdk.workspaces.upload(id, 'notes/a.txt', 'hello\n');
      await sdk.workspaces.upload(id, 'bin/b.dat', new Uint8Array([0, 1, 2, 255]));
      // 8 MiB from a Node stream, produced as it is sent.
      const chunk = Buffer.alloc(1024 * 1024, 7);
      let sent = 0;
      const big = Readable.from(
        (function* () {
          for (let i = 0; i < 8; i += 1) {
            sent += chunk.length;
            yield chunk;
          }
        })(),
      );
      const uploaded = await sdk.workspaces.upload(id, 'big/blob', big);
      assert.deepEqual(uploaded, { path: 'big/blob', size: 8 * 1024 * 1024 });
      assert.equal(sent, 8 * 1024 * 1024);

      assert.equal((await collect(await sdk.workspaces.download(id, 'notes/a.txt'))).toString(), 'hello\n');
      assert.deepEqual([...(await collect(await sdk.workspaces.download(id, 'bin/b.dat')))], [0, 1, 2, 255]);
      assert.equal((await collect(await sdk.workspaces.download(id, 'big/blob'))).length, 8 * 1024 * 1024);
      assert.equal((await collect(await sdk.workspaces.download(id, 'notes/a.txt', { range: { start: 1, end: 3 } }))).toString(), 'ell');

      const root = await sdk.workspaces.files(id);
      assert.deepEqual(root.entries.map((e) => `${e.name}:${e.type}`).sort(), ['big:directory', 'bin:directory', 'notes:directory']);
      const notes = await sdk.workspaces.files(id, 'notes');
      assert.equal(notes.entries[0]?.size, 6);
    });

    it('extracts an archive, archives the tree back, and diffs since the upload', async () => {
      const source = join(home, 'sdk-tree');
      await mkdir(join(source, 'src'), { recursive: true });
      await writeFile(join(source, 'src', 'main.txt'), 'one\n');
      await writeFile(join(source, 'README'), 'readme\n');
      const uploaded = await sdk.workspaces.uploadDirectory(id, source, { path: 'project' });
      assert.equal(uploaded.files, 2);
      await sdk.workspaces.upload(id, 'project/src/main.txt', 'two\n');
      const diff = await sdk.workspaces.diff(id, { since: 'upload' });
      assert.deepEqual(diff.changed, ['project/src/main.txt']);
      assert.match(diff.diff, /^-one$/m);
      assert.match(diff.diff, /^\+two$/m);
      assert.match(await sdk.workspaces.diffText(id, { since: 'upload' }), /^\+two$/m);

      const back = join(home, 'sdk-back');
      const pulled = await sdk.workspaces.downloadDirectory(id, back, { path: 'project' });
      assert.equal(pulled.files, 2);
      assert.equal(await readFile(join(back, 'src', 'main.txt'), 'utf8'), 'two\n');
    });

    it("a session started without a workspace has its own, listed with the caller's (the console finds it there)", async () => {
      const { session_id } = await sdk.run({ prompt: 'run: echo kept > kept.txt' });
      const own = (await sdk.workspaces.list()).workspaces.find((w) => w.sessions.includes(session_id));
      assert.ok(own, 'listed');
      assert.equal(own.owner_session, session_id);
      assert.equal((await collect(await sdk.workspaces.download(own.id, 'kept.txt'))).toString(), 'kept\n');
      await sdk.sessions.delete(session_id);
      await assert.rejects(sdk.workspaces.get(own.id), (error: unknown) => error instanceof BerthError && error.status === 404);
    });

    it("another caller's SDK gets 404 for the workspace and its files", async () => {
      const eve = new Berth({ url: t.url, apiToken: OTHER_TOKEN });
      for (const call of [() => eve.workspaces.get(id), () => eve.workspaces.files(id), () => eve.workspaces.download(id, 'notes/a.txt'), () => eve.workspaces.upload(id, 'x', 'x')]) {
        await assert.rejects(call(), (error: unknown) => error instanceof BerthError && error.status === 404);
      }
      assert.ok(!(await eve.workspaces.list()).workspaces.some((w) => w.id === id));
    });
  });
});
