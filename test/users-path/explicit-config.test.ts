// `make up` generates a JWT secret and an API token only for what the environment leaves unset: a value the
// user gives always wins, and an invalid one stops the start with a message naming the variable.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '..', '..');

/** Runs scripts/up.sh (what `make up` runs after setup) with the given variables; resolves at exit or when `until` sees its output. */
function up(env: Record<string, string>, until?: (output: string) => boolean) {
  const child = spawn('bash', ['scripts/up.sh'], { cwd: REPO, env: { ...process.env, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const done = new Promise<{ code: number | null; output: string }>((resolveDone) => {
    const check = () => {
      if (until?.(output)) resolveDone({ code: null, output });
    };
    child.stdout!.on('data', (chunk: Buffer) => ((output += chunk.toString()), check()));
    child.stderr!.on('data', (chunk: Buffer) => ((output += chunk.toString()), check()));
    child.once('exit', (code) => resolveDone({ code, output }));
  });
  return { child, done, stop: () => new Promise<void>((r) => (child.exitCode !== null ? r() : (child.once('exit', () => r()), process.kill(-child.pid!, 'SIGINT')))) };
}

describe('make up and explicit configuration', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  test('a too-short SERVICE_JWT_SECRET given explicitly stops the start, naming it', async () => {
    const started = up({ SERVICE_JWT_SECRET: 'k3Vq9ZpX2mLw7RtYHd8sJf2Lq0Wz5Nc' }, (output) => output.includes('berth is listening'));
    const { code, output } = await started.done;
    if (code === null) await started.stop();
    assert.notEqual(code, null, 'Berth must not start with the given secret replaced by a generated one');
    assert.notEqual(code, 0);
    assert.match(output, /SERVICE_JWT_SECRET: is 31 characters long/);
  });

  test('weak values given explicitly stop the start, naming the variable and never echoing the value', async () => {
    for (const [env, pattern] of [
      [{ SERVICE_API_TOKENS: 'test' }, /SERVICE_API_TOKENS: token 1 of 1 is 4 characters long/],
      [{ SERVICE_JWT_SECRET: 'secretsecretsecretsecretsecretse' }, /SERVICE_JWT_SECRET: /],
      [{ SERVICE_JWT_SECRET: '0123456789abcdef0123456789abcdef' }, /SERVICE_JWT_SECRET: /],
    ] as const) {
      const started = up(env, (output) => output.includes('berth is listening'));
      const { code, output } = await started.done;
      if (code === null) await started.stop();
      assert.notEqual(code, null, `Berth started with ${JSON.stringify(env)}`);
      assert.match(output, pattern);
    }
  });

  test('SERVICE_API_TOKENS given explicitly is the token that works, not a generated one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-test-up-'));
    dirs.push(dir);
    const token = `mine-${randomBytes(16).toString('hex')}`;
    const port = 18_000 + Math.floor(Math.random() * 2000);
    const berth = up(
      {
        SERVICE_API_TOKENS: token,
        SERVICE_ADDRESS: `127.0.0.1:${port}`,
        SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
        SERVICE_OFFLINE_MODEL_PORT: '0',
        SERVICE_DATA_DIR: join(dir, 'data'),
        SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
        SERVICE_INSTANCE_NAME: `test-up-${randomBytes(3).toString('hex')}`,
      },
      (output) => output.includes('berth is listening'),
    );
    try {
      const started = await berth.done;
      assert.equal(started.code, null, started.output.slice(-2000));
      assert.match(started.output, new RegExp(`Bearer ${token}`), 'the printed recipe uses the given token');
      const issued = await fetch(`http://127.0.0.1:${port}/auth/token`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ client_id: 'me' }),
      });
      assert.equal(issued.status, 200, await issued.clone().text());
    } finally {
      await berth.stop();
    }
  });
});
