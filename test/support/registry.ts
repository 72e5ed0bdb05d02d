// A real image registry on loopback for pull and search tests: Debian's docker-registry with a temporary
// storage directory on a free port, plain HTTP (so Podman needs tlsVerify=false for it). stop() kills the
// process it started and removes its storage.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REGISTRY_BINARY = '/usr/bin/docker-registry';

export interface TestRegistry {
  /** host:port, the registry part of references: `${host}/team/app:1`. */
  readonly host: string;
  /** Pushes a local image to `${host}/${repository}`. */
  push(localImage: string, repository: string): Promise<void>;
  stop(): Promise<void>;
}

function podmanEnv(): NodeJS.ProcessEnv {
  return { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? new URL('../../scripts/containers.conf', import.meta.url).pathname };
}

export async function podman(...args: string[]): Promise<string> {
  const { stdout } = await run('podman', args, { env: podmanEnv() });
  return stdout;
}

/** Installs docker-registry when it is missing, without leaving the package's own service running on :5000. */
async function ensureRegistryInstalled(): Promise<void> {
  if (existsSync(REGISTRY_BINARY)) return;
  await run('apt-get', ['install', '-y', 'docker-registry'], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  await run('systemctl', ['disable', '--now', 'docker-registry']).catch(() => undefined);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || !address) throw new Error('no free port');
  return address.port;
}

async function waitUntilServing(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}`);
    const ok = await fetch(url).then((r) => r.ok, () => false);
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`docker-registry did not answer at ${url} within ${timeoutMs} ms`);
}

export async function startTestRegistry(): Promise<TestRegistry> {
  await ensureRegistryInstalled();
  const dir = await mkdtemp(join(tmpdir(), 'berth-registry-'));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const config = [
    'version: 0.1',
    'log:',
    '  level: warn',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${join(dir, 'storage')}`,
    'http:',
    `  addr: ${host}`,
    '',
  ].join('\n');
  await writeFile(join(dir, 'config.yml'), config);
  const child = spawn(REGISTRY_BINARY, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.resume();
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilServing(`http://${host}/v2/`, child, 10_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    host,
    async push(localImage, repository) {
      await podman('push', '--tls-verify=false', '--quiet', localImage, `${host}/${repository}`);
    },
    stop,
  };
}
