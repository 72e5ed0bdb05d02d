// A crash on the users' path: `make up` (authentication on, the embedded offline model, the pools on), an
// idle agent and an async job with a webhook in flight, then `kill -9` of everything `make up` started and
// `make up` again. The job completes with its whole output and its webhook is delivered; the agent is still
// idle and answers its next turn; Ctrl-C then leaves no container of the instance.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { follow, turnEnded } from '../support/agents.js';
import { waitFor } from '../support/wait.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');

interface Up {
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<number | null>;
}

/** `make up` in its own process group (as a terminal runs it), resolved once Berth listens. */
async function makeUp(env: Record<string, string>): Promise<Up> {
  const child = spawn('make', ['up'], { cwd: REPO, env: { ...process.env, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  await waitFor('make up to start Berth', async () => {
    if (child.exitCode !== null) throw new Error(`make up exited with ${child.exitCode}:\n${output.slice(-3000)}`);
    return output.includes('berth is listening') || undefined;
  }, 300_000, 200);
  return { child, output: () => output, exited };
}

describe('a crash: kill -9 of make up during an async job, then make up again', () => {
  const instance = `test-crash-${randomBytes(3).toString('hex')}`;
  const token = `crash-${randomBytes(16).toString('hex')}`;
  const port = 18_000 + Math.floor(Math.random() * 2000);
  const url = `http://127.0.0.1:${port}`;
  let dir: string;
  let env: Record<string, string>;
  let receiver: Server;
  const deliveries: any[] = [];
  let up: Up | undefined;
  let auth: Record<string, string>;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-test-crash-'));
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        deliveries.push(JSON.parse(body));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
    env = {
      SERVICE_API_TOKENS: token,
      SERVICE_ADDRESS: `127.0.0.1:${port}`,
      SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
      // Fixed across both starts: the job's engine calls the model again once its tool has run.
      SERVICE_OFFLINE_MODEL_PORT: String(port + 2000),
      SERVICE_DATA_DIR: join(dir, 'data'),
      SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
      SERVICE_INSTANCE_NAME: instance,
      SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    };
    up = await makeUp(env);
    const issued = await fetch(`${url}/auth/token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: 'crash-test' }),
    });
    assert.equal(issued.status, 200);
    // The refresh-free access token outlives the restart: the JWT secret is the same (.service/local.env or the environment).
    auth = { authorization: `Bearer ${((await issued.json()) as { access_token: string }).access_token}` };
  });

  after(async () => {
    if (up && up.child.exitCode === null) {
      try {
        process.kill(-up.child.pid!, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await new Promise((done) => receiver?.close(done));
    const { stdout } = await exec('podman', ['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}']);
    for (const name of stdout.split('\n').filter(Boolean)) await exec('podman', ['rm', '--force', name]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

  test('the job completes with its whole output and its webhook, the idle agent answers, nothing is left', async () => {
    const agent = await api('POST', '/agents', {});
    assert.equal(agent.status, 200, JSON.stringify(agent.body));
    await waitFor('the agent to be idle', async () => ((await api('GET', `/agents/${agent.body.id}`)).body.status === 'idle') || undefined, 60_000);

    const prompt = 'say: begin crash\nrun: /bin/sleep 20\nsay: end crash';
    const job = await api('POST', '/run/async', { prompt, webhook_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const jobId: string = job.body.job_id;
    await waitFor('the job to run', async () => ((await api('GET', `/jobs/${jobId}`)).body.status === 'running') || undefined, 60_000);
    // The engine is inside its tool call (the sleep) when everything make up started is killed.
    await new Promise((done) => setTimeout(done, 3000));
    process.kill(-up!.child.pid!, 'SIGKILL');
    await up!.exited;

    up = await makeUp(env);
    const finished = await waitFor('the job to finish after the restart', async () => {
      const current = (await api('GET', `/jobs/${jobId}`)).body;
      return ['completed', 'failed', 'crashed', 'cancelled'].includes(current.status) ? current : undefined;
    }, 120_000, 250);
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    assert.match(finished.output, /begin crash[\s\S]*end crash/);
    const delivery = await waitFor('the webhook', async () => deliveries.find((d) => d.job_id === jobId), 30_000);
    assert.equal(delivery.status, 'completed');

    const restored = await api('GET', `/agents/${agent.body.id}`);
    assert.equal(restored.body.status, 'idle', JSON.stringify(restored.body));
    const stream = follow(`${url}/agents/${agent.body.id}/stream`, () => false, auth);
    await stream.ready;
    const sent = await api('POST', `/agents/${agent.body.id}/send`, { prompt: 'say: still here' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const until = turnEnded(sent.body.turn_id);
    await waitFor('the agent\'s turn', async () => until(stream.frames) || undefined, 60_000);
    stream.stop();
    const end = stream.frames.find((f) => f.event === 'turn_end' || f.event === 'error');
    assert.equal(end?.event, 'turn_end', JSON.stringify(stream.frames.slice(-3)));
    assert.ok(stream.frames.some((f) => f.event === 'output' && String(f.data.content).includes('still here')));

    // Ctrl-C: a graceful stop; afterwards no container of the instance is left.
    process.kill(-up.child.pid!, 'SIGINT');
    await up.exited;
    const { stdout } = await exec('podman', ['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}']);
    assert.deepEqual(stdout.split('\n').filter(Boolean), []);
  });
});
