// The users' path, as a newcomer walks it: a fresh clone in a new temporary directory (no .service/, no
// node_modules but what npm's own cache gives), `make up` exactly as the README says (under the strictest
// umask a user may have), the README's token recipe and example `curl` run literally, then many requests
// at once, then Ctrl-C; afterwards nothing of it may be left running, listening or labelled.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { mixedModes, runLoad } from '../support/load.js';
import { MARKER, readmeCommands } from '../support/readme-blocks.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
const URL = 'http://127.0.0.1:8080';
const CLIENTS_MARKER = '<!-- newcomer-test: runs this block verbatim (clients) -->';
const WORKSPACES_MARKER = '<!-- newcomer-test: runs this block verbatim (workspaces) -->';
const EGRESS_MARKER = '<!-- newcomer-test: runs this block verbatim (egress) -->';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** The environment of a new user's shell: none of Berth's settings, no Podman settings. */
function newcomerEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('SERVICE_') && name !== 'CONTAINERS_CONF' && !name.startsWith('NODE_') && !name.startsWith('npm_')) env[name] = value;
  }
  return env;
}


async function portIsFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      done(false);
    });
    socket.once('error', () => done(true));
  });
}

async function podmanLines(args: string[]): Promise<string[]> {
  const { stdout } = await exec('podman', args, { env: { ...process.env, CONTAINERS_CONF: join(REPO, 'scripts', 'containers.conf') } });
  return stdout.split('\n').filter((line) => line.trim() !== '');
}

/** The processes still in a process group. */
async function processGroup(pgid: number): Promise<string[]> {
  const { stdout } = await exec('ps', ['-eo', 'pgid=,pid=,args=']);
  return stdout
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.split(/\s+/)[0] === String(pgid));
}

describe('a newcomer: fresh clone, make up, the README commands, load, Ctrl-C', () => {
  let work: string;
  let clone: string;
  let up: ChildProcess | undefined;
  let output = '';
  let exited: Promise<number | null>;

  before(async () => {
    assert.ok(await portIsFree(8080), 'port 8080 must be free for the newcomer test (is another Berth running?)');
    work = await mkdtemp(join(tmpdir(), 'berth-newcomer-'));
    clone = join(work, 'berth');
    await exec('git', ['clone', '--quiet', REPO, clone]);
    up = spawn('sh', ['-c', 'umask 077 && exec make up'], { cwd: clone, env: newcomerEnvironment(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    up.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    up.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    exited = new Promise((done) => up!.once('exit', (code) => done(code)));
    const deadline = Date.now() + 15 * 60_000;
    while (!output.includes('berth is listening')) {
      if (up.exitCode !== null) assert.fail(`make up exited with ${up.exitCode}:\n${output.slice(-4000)}`);
      if (Date.now() > deadline) assert.fail(`make up did not start Berth within 15 minutes:\n${output.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  after(async () => {
    if (up?.pid !== undefined && (await processGroup(up.pid)).length > 0) {
      try {
        process.kill(-up.pid, 'SIGKILL');
      } catch {
        // Ended between the check and the kill.
      }
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  test('make up printed the token recipe and the example curl', () => {
    assert.match(output, /Get an access token/);
    assert.match(output, /curl -s -X POST http:\/\/127\.0\.0\.1:8080\/run/);
  });

  test('the README commands, run literally, answer a completed run on the first try', async () => {
    const commands = await readmeCommands(await readFile(join(clone, 'README.md'), 'utf8'));
    const { stdout } = await exec('bash', ['-ec', commands], { cwd: clone, env: newcomerEnvironment(), timeout: 120_000 });
    const body = JSON.parse(stdout.trim().split('\n').at(-1)!) as { status: string; output: string; session_id: string; error?: string };
    assert.equal(body.status, 'completed', stdout);
    assert.match(body.output, /^Linux /);
  });

  test('the README\'s client commands, run literally: berth login with the API token, then berth run', async () => {
    const commands = await readmeCommands(await readFile(join(clone, 'README.md'), 'utf8'), CLIENTS_MARKER);
    const config = join(work, 'berth-config');
    const { stdout } = await exec('bash', ['-ec', commands], { cwd: clone, env: { ...newcomerEnvironment(), BERTH_CONFIG_DIR: config }, timeout: 120_000 });
    assert.equal(stdout.trim().split('\n').at(-1), 'hi', stdout);
    // The tokens were kept for the next command, for this user only.
    const mode = (await exec('stat', ['-c', '%a', join(config, 'credentials.json')])).stdout.trim();
    assert.equal(mode, '600');
  });

  test('the README\'s workspace commands, run literally: push a directory, a run fixes a file, diff, pull', async () => {
    const commands = await readmeCommands(await readFile(join(clone, 'README.md'), 'utf8'), WORKSPACES_MARKER);
    // Signed in by the clients' block above, as the README says ("after npx berth login above").
    const config = join(work, 'berth-config');
    const { stdout } = await exec('bash', ['-ec', commands], { cwd: clone, env: { ...newcomerEnvironment(), BERTH_CONFIG_DIR: config }, timeout: 180_000 });
    assert.match(stdout, /^\+exports\.add = \(a, b\) => a \+ b;$/m, stdout);
    assert.match(stdout, /^-exports\.add = \(a, b\) => a - b;$/m, stdout);
    assert.equal(stdout.trim().split('\n').at(-1), 'exports.add = (a, b) => a + b;', stdout);
  });

  test('the README\'s egress commands, run literally: the run holds its own token, a host not listed is refused, usage is shown', async () => {
    const commands = await readmeCommands(await readFile(join(clone, 'README.md'), 'utf8'), EGRESS_MARKER);
    const config = join(work, 'berth-config');
    const { stdout } = await exec('bash', ['-ec', commands], { cwd: clone, env: { ...newcomerEnvironment(), BERTH_CONFIG_DIR: config }, timeout: 120_000 });
    const lines = stdout.split('\n');
    assert.equal(lines[0], 'brt_', stdout);
    assert.match(stdout, /CONNECT tunnel failed, response 403/, stdout);
    // `berth usage` lists today's requests of this caller: the runs above made some.
    assert.match(stdout, /^today: +[1-9]\d* requests/m, stdout);
  });

  test('the web console: sign in with the API token, spawn an agent and chat with it', async () => {
    const apiToken = /^SERVICE_API_TOKENS=([^,\n]+)/m.exec(await readFile(join(clone, '.service', 'local.env'), 'utf8'))![1]!;
    const profile = join(work, 'chromium');
    await mkdir(profile);
    const browser = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      const page = browser.pages()[0] ?? (await browser.newPage());
      const wait = { timeout: 60_000 };
      await page.goto(`${URL}/console`);
      await page.getByLabel('API token or access token').fill(apiToken);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Agents' }).click();
      await page.getByRole('button', { name: 'Spawn agent' }).click();
      await page.waitForURL(/\/console\/agents\/agent-/, wait);
      await page.getByLabel('Message').fill('say: hello from the console');
      const send = page.getByRole('button', { name: 'Send' });
      await page.waitForFunction(() => !(document.querySelector('.message-box button[type=submit]') as HTMLButtonElement).disabled, undefined, wait);
      await send.click();
      await page.getByTestId('chat-log').locator('.message-assistant .content', { hasText: 'hello from the console' }).waitFor(wait);
      await page.getByRole('button', { name: 'Delete agent' }).click();
      await page.waitForURL(/\/console\/agents$/, wait);
    } finally {
      await browser.close();
    }
  });

  test('48 requests at concurrency 8 (sync, async and stream) all succeed', async () => {
    const local = await readFile(join(clone, '.service', 'local.env'), 'utf8');
    const apiToken = /^SERVICE_API_TOKENS=([^,\n]+)/m.exec(local)![1]!;
    const issued = await fetch(`${URL}/auth/token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: 'newcomer-load' }),
    });
    const { access_token } = (await issued.json()) as { access_token: string };
    const results = await runLoad({ url: URL, headers: { authorization: `Bearer ${access_token}` }, total: 48, concurrency: 8, modeOf: mixedModes });
    assert.deepEqual(results.filter((r) => !r.ok), []);
    for (const r of results) assert.equal(r.output, `load ${r.index}`);
  });

  test('Ctrl-C stops everything make up started; nothing is left running, listening or labelled', async () => {
    // A terminal's Ctrl-C: SIGINT to the whole foreground process group (make, its shell, node).
    process.kill(-up!.pid!, 'SIGINT');
    await exited;
    const deadline = Date.now() + 60_000;
    while ((await processGroup(up!.pid!)).length > 0) {
      assert.ok(Date.now() < deadline, `make up's processes did not end within 60 s of Ctrl-C: ${(await processGroup(up!.pid!)).join('; ')}\n${output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.match(output, /stopping: cancelling runs/, 'Berth stopped gracefully');
    assert.ok(await portIsFree(8080), 'nothing listens on 8080 any more');
    assert.ok(await portIsFree(8787), 'the offline model no longer listens on 8787');
    assert.deepEqual(await podmanLines(['ps', '-a', '--filter', 'label=berth.instance=default', '--format', '{{.Names}}']), []);
    assert.deepEqual(await podmanLines(['ps', '-a', '--filter', 'label=berth.image-tree=default', '--format', '{{.Names}}']), []);
    assert.deepEqual((await podmanLines(['secret', 'ls', '--format', '{{.Name}}'])).filter((name) => name.startsWith('berth-offline-model-key-default-')), []);
    const { stdout } = await exec('ps', ['-eo', 'pid,args']);
    assert.deepEqual(stdout.split('\n').filter((line) => line.includes(clone)), [], 'no process of the clone is left');
    // Nor a mount: workspaces' disks and views, run disks, the shared binds of their directories.
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((line) => line.split(' ')[4] ?? '');
    assert.deepEqual(mounts.filter((path) => path.startsWith(clone)), [], 'nothing of the clone is left mounted');
  });
});
