// Starts a real Berth for integration tests: its own Podman service, the real engine image, the
// embedded offline model, temporary data and session directories, and a unique instance name so that
// leftovers can be listed (and must be none) when it stops.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { loadConfig, type Config } from '../../src/config.js';
import { startBerth, type RunningBerth } from '../../src/server.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { INSTANCE_LABEL, STACK_INSTANCE_LABEL } from '../../src/runtime/container-runtime.js';
import { unbindVolumeData } from '../../src/runtime/podman/volume-backing.js';
import { LoopDisks } from '../../src/runtime/run-disk.js';
import { StackDisks } from '../../src/runtime/stack-disk.js';

const exec = promisify(execFile);
import { traceFields } from '../../src/logging.js';
import { removeTestDir } from './test-dir.js';

export interface TestBerth {
  readonly berth: RunningBerth;
  readonly config: Config;
  readonly url: string;
  readonly dir: string;
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
  /**
   * Agent containers of this instance that still exist once every run answered at its result has ended
   * (engines ready in the pool are not counted).
   */
  leftovers(): Promise<string[]>;
  stop(): Promise<void>;
}

/** The containers, volumes and networks of an instance's compose stacks, by name (podman CLI: also after a stop). */
export async function stackResourcesOf(instance: string): Promise<{ containers: string[]; volumes: string[]; networks: string[] }> {
  const filter = `label=${STACK_INSTANCE_LABEL}=${instance}`;
  const names = async (args: string[]) => (await exec('podman', args)).stdout.split('\n').filter(Boolean);
  return {
    containers: await names(['ps', '-a', '--filter', filter, '--format', '{{.Names}}']),
    volumes: await names(['volume', 'ls', '--filter', filter, '--format', '{{.Name}}']),
    networks: await names(['network', 'ls', '--filter', filter, '--format', '{{.Name}}']),
  };
}

/**
 * Removes every container, volume and network of an instance's compose stacks, and (given their directory)
 * the stacks' disks: their volumes' data directories unbound first (runtime/podman/volume-backing.ts).
 */
export async function removeStacksOf(instance: string, stackDisksDir?: string): Promise<void> {
  const { containers, volumes, networks } = await stackResourcesOf(instance);
  if (containers.length > 0) await exec('podman', ['rm', '--force', '--volumes', ...containers]);
  for (const volume of volumes) {
    const { stdout } = await exec('podman', ['volume', 'inspect', '--format', '{{.Mountpoint}}', volume]);
    await unbindVolumeData(stdout.trim());
  }
  if (volumes.length > 0) await exec('podman', ['volume', 'rm', '--force', ...volumes]);
  if (networks.length > 0) await exec('podman', ['network', 'rm', '--force', ...networks]);
  if (stackDisksDir !== undefined) {
    const disks = new StackDisks(stackDisksDir, new LoopDisks(), 0);
    for (const sessionId of await disks.sessions()) await disks.release(sessionId);
  }
}

/**
 * SERVICE_ENGINE_BASE_URL for a model listening on the host at `port`, as engine containers on Podman's
 * default network reach it: by the network's gateway address (as Berth itself does for its offline model),
 * not by a name the engine would have to look up.
 */
export async function modelUrlFromContainers(port: number): Promise<string> {
  const gateway = (await exec('podman', ['network', 'inspect', 'podman', '--format', '{{range .Subnets}}{{.Gateway}} {{end}}'])).stdout.trim().split(' ')[0];
  if (!gateway) throw new Error('podman network "podman" has no gateway');
  return `http://${gateway}:${port}`;
}

/** The configuration of a test Berth: no auth or rate limit, ephemeral ports, state under `dir`. */
export function testEnvironment(dir: string, instance: string, port = 0): Record<string, string> {
  return {
    SERVICE_AUTH_ENABLED: 'false',
    SERVICE_RATE_LIMIT_ENABLED: 'false',
    SERVICE_ADDRESS: `127.0.0.1:${port}`,
    SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
    SERVICE_OFFLINE_MODEL_PORT: '0',
    SERVICE_DATA_DIR: join(dir, 'data'),
    SERVICE_AGENT_SESSIONS_DIR: join(dir, 'sessions'),
    SERVICE_INSTANCE_NAME: instance,
    SERVICE_ENGINE_CREDENTIALS_SECRET: `berth-test-none-${instance}`,
    SERVICE_LOG_LEVEL: process.env.BERTH_TEST_LOG_LEVEL ?? 'warn',
  };
}

export interface TestBerthOptions {
  /** Receives every log record Berth writes at the configured level (SERVICE_LOG_LEVEL), parsed. */
  readonly onLog?: (record: Record<string, unknown>) => void;
}

export async function startTestBerth(env: Record<string, string> = {}, options: TestBerthOptions = {}): Promise<TestBerth> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
  const instance = `test-${randomBytes(4).toString('hex')}`;
  const config = loadConfig({ ...testEnvironment(dir, instance), ...env });
  const { onLog } = options;
  const logger = onLog
    ? pino({ level: config.logLevel, mixin: traceFields }, { write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>) })
    : pino({ level: config.logLevel, mixin: traceFields });
  const berth = await startBerth(config, logger);
  let stopped = false;
  return {
    berth,
    config,
    url: berth.url,
    dir,
    async request(method, path, body, headers = {}) {
      const response = await fetch(`${berth.url}${path}`, {
        method,
        headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON (SSE, metrics): keep the text.
      }
      return { status: response.status, body: parsed, headers: response.headers };
    },
    async leftovers() {
      await berth.settled();
      // Pre-started engines the pool holds belong to no run: they are not left over. Listed first, then the
      // pool asked: it names its engines before they exist, so no engine listed can be missing from its set.
      const containers = await berth.runtime.listContainers(`${INSTANCE_LABEL}=${instance}`);
      const pooled = new Set(berth.pools.ownContainerNames());
      return containers.map((c) => c.names[0] ?? c.id).filter((name) => !pooled.has(name));
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await berth.stop();
      // Compose stacks outlive a stop (they belong to sessions); when this test Berth's sessions go with its
      // directory, its stacks go too, as the next start of the instance would remove them.
      if (config.agent.sessionsDir.startsWith(`${dir}/`)) await removeStacksOf(instance, join(config.agent.sessionsDir, '.stacks'));
      await removeTestDir(dir);
    },
  };
}

/** A metric's value from the Berth's metrics listener (0 when absent). */
export async function metric(t: TestBerth, name: string): Promise<number> {
  const text = await (await fetch(t.berth.metricsUrl)).text();
  const escaped = name.replace(/[{}"]/g, (c) => `\\${c}`);
  const match = new RegExp(`^${escaped} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

/** Waits until the Berth's pool holds `count` ready engines (at most `withinMs`). */
export async function poolReady(t: TestBerth, count: number, pool: 'run' | 'agent' = 'run', withinMs = 30_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while ((await metric(t, `berth_pool_ready{pool="${pool}"}`)) < count) {
    if (Date.now() > deadline) throw new Error(`the ${pool} pool did not fill to ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
