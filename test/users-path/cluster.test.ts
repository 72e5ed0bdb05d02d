// The users' path of several nodes (issue 26), as the README's "Deploying, and running several nodes" walks it:
// a fresh clone, `make cluster` as a user runs it (no settings of Berth's in the environment, umask 077), the
// README's quick-start and client blocks run literally against HAProxy on 127.0.0.1:8080, load at concurrency
// 8, then the `kill -9` of a node that make cluster itself prints, the same blocks and load again once HAProxy
// has taken the node out, every job accepted before the kill final, and Ctrl-C: nothing of the clone left
// running, listening, mounted or labelled. (test/integration/cluster.test.ts attacks the cluster itself: its
// database, a node lost mid-load, sessions and streams across nodes.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { mixedModes, runLoad, type LoadResult } from '../support/load.js';
import { readmeCommands } from '../support/readme-blocks.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
const URL = 'http://127.0.0.1:8080';
const CLIENTS_MARKER = '<!-- newcomer-test: runs this block verbatim (clients) -->';
/** make cluster's ports (scripts/cluster.sh): HAProxy, the three nodes. */
const PORTS = [8080, 8081, 8082, 8083];
const INSTANCES = ['cluster-node-1', 'cluster-node-2', 'cluster-node-3'];
/** After the kill, HAProxy's health check (deploy/haproxy.cfg) takes the node out within this. */
const TAKEN_OUT_MS = 8_000;

function userEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('SERVICE_') && !name.startsWith('BERTH_') && name !== 'CONTAINERS_CONF' && !name.startsWith('NODE_') && !name.startsWith('npm_')) env[name] = value;
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

async function processGroup(pgid: number): Promise<string[]> {
  const { stdout } = await exec('ps', ['-eo', 'pgid=,pid=,args=']);
  return stdout.split('\n').map((line) => line.trim()).filter((line) => line.split(/\s+/)[0] === String(pgid));
}

async function podmanLines(args: string[]): Promise<string[]> {
  const { stdout } = await exec('podman', args, { env: { ...process.env, CONTAINERS_CONF: join(REPO, 'scripts', 'containers.conf') } });
  return stdout.split('\n').filter((line) => line.trim() !== '');
}

describe('several nodes: fresh clone, make cluster, the README commands, a node killed, Ctrl-C', () => {
  let work: string;
  let clone: string;
  let cluster: ChildProcess | undefined;
  let output = '';
  let exited: Promise<number | null>;
  let accessToken: string;
  const jobsBeforeKill: string[] = [];

  const load = async (label: string, total: number): Promise<LoadResult[]> => {
    const results = await runLoad({ url: URL, headers: { authorization: `Bearer ${accessToken}` }, total, concurrency: 8, modeOf: mixedModes });
    assert.deepEqual(results.filter((r) => !r.ok), [], `${label}: every request succeeds`);
    for (const r of results) assert.equal(r.output, `load ${r.index}`);
    return results;
  };
  const readmeBlock = async (marker?: string) => readmeCommands(await readFile(join(clone, 'README.md'), 'utf8'), marker);

  before(async () => {
    for (const port of PORTS) assert.ok(await portIsFree(port), `port ${port} must be free for make cluster (is a Berth running?)`);
    work = await mkdtemp(join(tmpdir(), 'berth-cluster-user-'));
    clone = join(work, 'berth');
    await exec('git', ['clone', '--quiet', REPO, clone]);
    cluster = spawn('sh', ['-c', 'umask 077 && exec make cluster'], { cwd: clone, env: userEnvironment(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    cluster.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    cluster.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    exited = new Promise((done) => cluster!.once('exit', (code) => done(code)));
    const deadline = Date.now() + 15 * 60_000;
    while (!output.includes('Try losing a node:')) {
      if (cluster.exitCode !== null) assert.fail(`make cluster exited with ${cluster.exitCode}:\n${output.slice(-4000)}`);
      if (Date.now() > deadline) assert.fail(`make cluster did not start within 15 minutes:\n${output.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const apiToken = /^SERVICE_API_TOKENS=([^,\n]+)/m.exec(await readFile(join(clone, '.service', 'local.env'), 'utf8'))![1]!;
    const issued = await fetch(`${URL}/auth/token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: 'cluster-user' }),
    });
    assert.equal(issued.status, 200);
    accessToken = ((await issued.json()) as { access_token: string }).access_token;
  });

  after(async () => {
    if (cluster?.pid !== undefined && (await processGroup(cluster.pid)).length > 0) {
      try {
        process.kill(-cluster.pid, 'SIGKILL');
      } catch {
        // Ended between the check and the kill.
      }
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  test('make cluster printed what make up prints, against HAProxy on 127.0.0.1:8080', () => {
    assert.match(output, /Get an access token/);
    assert.match(output, /curl -s -X POST http:\/\/127\.0\.0\.1:8080\/run/);
  });

  test('the README\'s quick-start and client blocks, run literally, answer through HAProxy', async () => {
    const { stdout } = await exec('bash', ['-ec', await readmeBlock()], { cwd: clone, env: userEnvironment(), timeout: 120_000 });
    const body = JSON.parse(stdout.trim().split('\n').at(-1)!) as { status: string; output: string };
    assert.equal(body.status, 'completed', stdout);
    assert.match(body.output, /^Linux /);
    const config = join(work, 'berth-config');
    const client = await exec('bash', ['-ec', await readmeBlock(CLIENTS_MARKER)], { cwd: clone, env: { ...userEnvironment(), BERTH_CONFIG_DIR: config }, timeout: 120_000 });
    assert.equal(client.stdout.trim().split('\n').at(-1), 'hi', client.stdout);
  });

  test('24 requests at concurrency 8 (sync, async, stream) all succeed, spread over the nodes', async () => {
    await load('before the kill', 24);
    // Jobs still to run when the node goes: accepted now, they must end, exactly once, after it.
    for (let i = 0; i < 6; i += 1) {
      const submitted = await fetch(`${URL}/run/async`, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: `sleep: 1500\nsay: queued ${i}` }),
      });
      assert.equal(submitted.status, 200);
      jobsBeforeKill.push(((await submitted.json()) as { job_id: string }).job_id);
    }
  });

  test('the kill -9 make cluster prints: the jobs accepted before it end once, and the README blocks and load succeed again', async () => {
    const kill = /Try losing a node: (.+)$/m.exec(output)![1]!.trim();
    await exec('bash', ['-ec', kill], { cwd: clone, env: userEnvironment() });
    await new Promise((r) => setTimeout(r, TAKEN_OUT_MS));
    const { stdout } = await exec('bash', ['-ec', await readmeBlock()], { cwd: clone, env: userEnvironment(), timeout: 120_000 });
    assert.equal((JSON.parse(stdout.trim().split('\n').at(-1)!) as { status: string }).status, 'completed', stdout);
    await load('after the kill', 24);
    // The lease (15 s) lapses, and another node takes the lost node's work over: queued jobs run, running ones crash.
    const deadline = Date.now() + 120_000;
    for (const id of jobsBeforeKill) {
      for (;;) {
        const read = await fetch(`${URL}/jobs/${id}`, { headers: { authorization: `Bearer ${accessToken}` } });
        assert.equal(read.status, 200);
        const job = (await read.json()) as { status: string; crash_info: { reason: string } | null };
        if (['completed', 'crashed'].includes(job.status)) {
          if (job.status === 'crashed') assert.equal(job.crash_info?.reason, 'node_lost', JSON.stringify(job));
          break;
        }
        assert.ok(['pending', 'running'].includes(job.status), JSON.stringify(job));
        assert.ok(Date.now() < deadline, `job ${id} did not end within 2 minutes of the kill: ${JSON.stringify(job)}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  });

  test('Ctrl-C stops the cluster; nothing of the clone is left running, listening, mounted or labelled', async () => {
    process.kill(-cluster!.pid!, 'SIGINT');
    await exited;
    const deadline = Date.now() + 120_000;
    while ((await processGroup(cluster!.pid!)).length > 0) {
      assert.ok(Date.now() < deadline, `make cluster's processes did not end within 120 s of Ctrl-C: ${(await processGroup(cluster!.pid!)).join('; ')}\n${output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    for (const port of PORTS) assert.ok(await portIsFree(port), `nothing listens on ${port} any more`);
    for (const instance of INSTANCES) {
      assert.deepEqual(await podmanLines(['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}']), [], instance);
    }
    const { stdout } = await exec('ps', ['-eo', 'pid,args']);
    assert.deepEqual(stdout.split('\n').filter((line) => line.includes(clone)), [], 'no process of the clone is left');
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').map((line) => line.split(' ')[4] ?? '');
    assert.deepEqual(mounts.filter((path) => path.startsWith(clone)), [], 'nothing of the clone is left mounted');
  });
});
