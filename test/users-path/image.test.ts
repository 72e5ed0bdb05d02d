// Berth's image (issue 27), as an operator deploys it: `make image`'s script builds localhost/berth:<version>,
// docs/deploy.md's `podman run` block runs verbatim (with this test's directory, Podman socket, instance
// name and port), the README's token and `/run` curl get the offline model's answer from the compiled server
// in the container, a request without a token is refused, and after `podman stop` nothing of it is left:
// the Berth container, its run containers, its network, its nftables tables, its mounts and loop devices.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { SignJWT } from 'jose';
import { containersOf, removeAgentNetworkOf, testEnvironment } from '../support/berth.js';
import { freePort } from '../support/postgres.js';
import { removeTestDir } from '../support/test-dir.js';
import { waitFor } from '../support/wait.js';
import { mountPoints } from '../../src/runtime/run-disk.js';
import { INSTANCE_LABEL } from '../../src/runtime/ports/labels.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
const VERSION = (JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const IMAGE = `localhost/berth:${VERSION}`;
const CONTAINERS_CONF = process.env.CONTAINERS_CONF ?? join(REPO, 'scripts', 'containers.conf');
const DEPLOY_MARKER = '<!-- deploy-test:';
const README_MARKER = '<!-- newcomer-test: runs this block verbatim -->';

/** The ```sh block that follows `marker` in a Markdown file of the repository. */
async function shellBlockAfter(file: string, marker: string): Promise<string> {
  const text = await readFile(join(REPO, file), 'utf8');
  const at = text.indexOf(marker);
  assert.ok(at >= 0, `${file} marks its block with ${marker}`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(block, `a \`\`\`sh block follows ${marker} in ${file}`);
  return block[1]!;
}

async function bash(script: string, options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ stdout: string; stderr: string }> {
  return exec('bash', ['-euo', 'pipefail', '-c', script], { cwd: options.cwd, env: options.env, timeout: options.timeoutMs, maxBuffer: 16 << 20 });
}

/** Loop devices whose backing file is below `dir`. */
async function loopDevicesBelow(dir: string): Promise<string[]> {
  const { stdout } = await exec('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE']);
  return stdout.split('\n').filter((line) => line.includes(`${dir}/`)).map((line) => line.trim());
}

async function nftTablesOf(instance: string): Promise<string[]> {
  const { stdout } = await exec('nft', ['list', 'tables']);
  return stdout.split('\n').filter((line) => line.endsWith(` berth-${instance}`));
}

async function podman(args: string[]): Promise<string> {
  return (await exec('podman', args, { env: { ...process.env, CONTAINERS_CONF } })).stdout.trim();
}

/** The end of a container's log: Berth logs to stdout, a failed start's stack goes to stderr. */
async function logsOf(name: string): Promise<string> {
  const { stdout, stderr } = await exec('podman', ['logs', '--tail', '40', name], { env: { ...process.env, CONTAINERS_CONF } }).catch((error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: error.stderr ?? '' }));
  return `${stdout}${stderr}`;
}

/** Podman's rootful API on a socket of this test's (the host's podman.socket stands for it in docs/deploy.md). */
async function startPodmanService(socket: string): Promise<ChildProcess> {
  const service = spawn('podman', ['system', 'service', '--time=0', `unix://${socket}`], {
    env: { ...process.env, CONTAINERS_CONF },
    stdio: 'ignore',
    detached: true,
  });
  await waitFor('the Podman service', async () => (await exec('curl', ['-sf', '--unix-socket', socket, 'http://d/_ping']).then(() => true, () => false)) || undefined, 30_000);
  return service;
}

describe('the image: make image, the documented podman run, the README curl, podman stop', { timeout: 600_000 }, () => {
  const instance = `test-${randomBytes(4).toString('hex')}`;
  const name = `berth-${instance}`;
  let dir: string;
  let port: number;
  let apiToken: string;
  let service: ChildProcess | undefined;
  let started = false;
  let madeShared = false;

  before(async () => {
    // Cached: a second build with unchanged inputs does nothing (the base is built once per package list).
    const built = await bash('bash scripts/build-berth-image.sh', { cwd: REPO, env: { ...process.env, CONTAINERS_CONF }, timeoutMs: 480_000 });
    assert.match(built.stdout, new RegExp(`(built|is up to date).*${IMAGE.replace(/[.]/g, '\\.')}|${IMAGE.replace(/[.]/g, '\\.')}.*(built|is up to date)`));
    dir = await mkdtemp(join(tmpdir(), 'berth-image-'));
    port = await freePort();
    apiToken = `berth-image-${randomBytes(16).toString('hex')}`;
    // The settings file the block passes with --env-file. It is where the README's block reads the API token
    // (.service/local.env), so the README's lines run unchanged from this directory.
    const settings: Record<string, string> = {
      ...testEnvironment(dir, instance, port),
      SERVICE_AUTH_ENABLED: 'true',
      SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
      SERVICE_API_TOKENS: apiToken,
      SERVICE_LOG_LEVEL: 'info',
    };
    // The block itself sets them, to paths below BERTH_DIR.
    delete settings.SERVICE_DATA_DIR;
    delete settings.SERVICE_AGENT_SESSIONS_DIR;
    await mkdir(join(dir, '.service'), { mode: 0o700 });
    await writeFile(join(dir, '.service', 'local.env'), Object.entries(settings).map(([k, v]) => `${k}=${v}\n`).join(''), { mode: 0o600 });
    // docs/deploy.md: rshared needs the host's side on a shared mount; systemd makes `/` shared at boot, this
    // test machine's init does not. Made shared for this test only, and put back after it: the other suites
    // run on a private `/`, and a `/` made shared while another shard's Berth mounted run disks stacked its
    // mounts (attack-disk's restart case saw a run disk mounted twice). Hence this file is in the users' path,
    // which runs alone, after the integration shards.
    madeShared = (await exec('findmnt', ['-no', 'PROPAGATION', '/'])).stdout.trim() === 'private';
    if (madeShared) await exec('mount', ['--make-shared', '/']);
    service = await startPodmanService(join(dir, 'podman.sock'));
  });

  after(async () => {
    // On a failure path too: the container, then what its Berth could not remove, then the directory.
    if (started) await podman(['rm', '--force', '--time', '60', name]).catch(() => undefined);
    const left = await containersOf(instance);
    if (left.length > 0) await podman(['rm', '--force', ...left.map((c) => c.name)]).catch(() => undefined);
    await removeAgentNetworkOf(instance).catch(() => undefined);
    if (service?.pid !== undefined) {
      process.kill(-service.pid, 'SIGTERM');
      await new Promise((resolve) => (service!.exitCode !== null ? resolve(undefined) : service!.once('exit', resolve)));
    }
    if (dir !== undefined) await removeTestDir(dir);
    if (madeShared) await exec('mount', ['--make-private', '/']);
  });

  test('the documented podman run serves /health and the README curl, refuses no token, and podman stop leaves nothing', { timeout: 300_000 }, async () => {
    const block = await shellBlockAfter('docs/deploy.md', DEPLOY_MARKER);
    const env = {
      ...process.env,
      CONTAINERS_CONF,
      BERTH_DIR: join(dir, 'berth'),
      BERTH_ENV: join(dir, '.service', 'local.env'),
      BERTH_NAME: name,
      PODMAN_SOCKET: join(dir, 'podman.sock'),
      BERTH_IMAGE: IMAGE,
    };
    started = true;
    await bash(block, { cwd: dir, env, timeoutMs: 60_000 });
    const url = `http://127.0.0.1:${port}`;
    // Until /health answers, or the container ends (a failed start: its log says why).
    const outcome = await waitFor(
      'Berth in its container to answer /health',
      async () => {
        if ((await podman(['inspect', '--format', '{{.State.Status}}', name])) !== 'running') return 'ended';
        return (await fetch(`${url}/health`)).ok ? 'answering' : undefined;
      },
      // About 5 s here; 40 s seen with a load average of 36 on 2 cores (other suites running).
      180_000,
      250,
    ).catch((error: Error) => error.message);
    assert.equal(outcome, 'answering', await logsOf(name));
    const health = (await (await fetch(`${url}/health`)).json()) as { status: string };
    assert.equal(health.status, 'ok', JSON.stringify(health));

    // The compiled server, not the sources through tsx.
    const pid = await podman(['inspect', '--format', '{{.State.Pid}}', name]);
    const command = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    assert.equal(command.split('\0').filter(Boolean).join(' '), '/usr/local/bin/node /opt/berth/dist/main.js');

    // The README's block, unchanged but for the port.
    const readme = (await shellBlockAfter('README.md', README_MARKER)).replaceAll('localhost:8080', `localhost:${port}`);
    const { stdout } = await bash(readme, { cwd: dir, env: process.env, timeoutMs: 120_000 });
    const answer = JSON.parse(stdout) as { status: string; output: string; session_id: string };
    assert.equal(answer.status, 'completed', stdout);
    assert.match(answer.output, /^Linux /, stdout);

    // The container holds the host's Podman socket: the API in front of it still refuses a request without
    // a token, with a token that is none, and with an access token signed by another key.
    const forged = await new SignJWT({ sub: 'me' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('5m').sign(randomBytes(32));
    for (const authorization of [undefined, 'Bearer not-a-token', `Bearer ${forged}`]) {
      const refused = await fetch(`${url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
        body: JSON.stringify({ prompt: 'run: podman ps' }),
      });
      assert.equal(refused.status, 401, `${authorization ?? 'no token'}: ${await refused.text()}`);
    }

    // podman stop: SIGTERM to Berth, which removes what it made before it exits.
    await podman(['stop', '--time', '120', name]);
    const exit = await podman(['inspect', '--format', '{{.State.ExitCode}}', name]);
    assert.equal(exit, '0', `Berth's exit code after podman stop\n${await logsOf(name)}`);
    await podman(['rm', name]);
    started = false;

    assert.deepEqual(await podman(['ps', '--all', '--filter', `name=^${name}$`, '--format', '{{.Names}}']), '', 'the Berth container');
    assert.deepEqual((await containersOf(instance)).map((c) => c.name), [], 'run and pool containers of the instance');
    assert.equal(await podman(['network', 'ls', '--filter', `label=${INSTANCE_LABEL}=${instance}`, '--format', '{{.Name}}']), '', 'networks of the instance');
    assert.deepEqual(await nftTablesOf(instance), [], 'nftables tables of the instance');
    const mounts = [...(await mountPoints())].filter((path) => path.startsWith(`${dir}/`));
    assert.deepEqual(mounts, [], 'mounts below the test directory, as the host sees them');
    assert.deepEqual(await loopDevicesBelow(dir), [], 'loop devices backed by files below the test directory');
  });
});

// deploy/berth.service drops capabilities from the bounding set of Berth and every child it starts
// (CapabilityBoundingSet=~…). systemd is not PID 1 here, so the same set is applied with setpriv to the
// compiled server the unit runs: a run, a run on a workspace disk (loop mount) and a clean stop still work.
describe('the compiled server under the unit\'s capability bounding set', { timeout: 300_000 }, () => {
  test('runs a prompt and a workspace run, and stops with nothing left', async () => {
    const unit = await readFile(join(REPO, 'deploy', 'berth.service'), 'utf8');
    const dropped = /^CapabilityBoundingSet=~(.+)$/m.exec(unit)?.[1]?.trim().split(/\s+/) ?? [];
    assert.ok(dropped.length > 0, 'the unit drops capabilities');
    const bounding = dropped.map((cap) => `-${cap.replace(/^CAP_/, '').toLowerCase()}`).join(',');
    assert.ok(await readFile(join(REPO, 'dist', 'main.js')).then(() => true, () => false), 'dist/main.js (built by the image build above)');
    const dir = await mkdtemp(join(tmpdir(), 'berth-unit-caps-'));
    const instance = `test-${randomBytes(4).toString('hex')}`;
    const port = await freePort();
    const server = spawn('setpriv', ['--bounding-set', bounding, '--', process.execPath, join(REPO, 'dist', 'main.js')], {
      cwd: REPO,
      env: { ...process.env, CONTAINERS_CONF, ...testEnvironment(dir, instance, port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    server.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitFor('the compiled server to answer /health', async () => server.exitCode === null && (await fetch(`${url}/health`)).ok, 120_000, 250).catch((error: Error) => {
        throw new Error(`${error.message}\n${stderr}`);
      });
      const status = await readFile(`/proc/${server.pid}/status`, 'utf8');
      assert.match(status, /CapBnd:\s+0*[0-9a-f]+/);
      assert.notEqual(/CapBnd:\s+([0-9a-f]+)/.exec(status)![1], /CapBnd:\s+([0-9a-f]+)/.exec(await readFile('/proc/self/status', 'utf8'))![1], 'the bounding set is narrower than the test\'s');
      const post = async (path: string, body: unknown) =>
        (await (await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json()) as Record<string, any>;
      const run = await post('/run', { prompt: 'run: uname -s' });
      assert.equal(run.output, 'Linux', JSON.stringify(run));
      const workspace = await post('/workspaces', {});
      const onDisk = await post('/run', { prompt: 'run: df . | tail -1', workspace: workspace.id });
      assert.match(String(onDisk.output), /^\/dev\/loop\d+ .* \/workspace$/, JSON.stringify(onDisk));
      server.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      assert.deepEqual((await containersOf(instance)).map((c) => c.name), [], 'containers of the instance');
      assert.deepEqual([...(await mountPoints())].filter((path) => path.startsWith(`${dir}/`)), [], 'mounts below its directory');
      assert.deepEqual(await loopDevicesBelow(dir), [], 'loop devices below its directory');
    } finally {
      if (server.exitCode === null) {
        server.kill('SIGKILL');
        await exited;
        // What a killed Berth leaves: its containers and its own Podman service (runtime/podman/service-process.ts).
        const left = await containersOf(instance);
        if (left.length > 0) await podman(['rm', '--force', ...left.map((c) => c.name)]).catch(() => undefined);
        const podmanPid = Number(await readFile(join(dir, 'data', 'podman', 'podman.pid'), 'utf8').catch(() => ''));
        if (podmanPid > 0) process.kill(podmanPid, 'SIGTERM');
      }
      await removeAgentNetworkOf(instance).catch(() => undefined);
      await removeTestDir(dir);
    }
  });
});
