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
import { IMAGE_TREE_LABEL, INSTANCE_LABEL, STACK_INSTANCE_LABEL } from '../../src/runtime/ports/labels.js';
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
   * Containers of this instance that still exist once every run answered at its result has ended, beyond
   * the live ones the configured pools may hold (counted by the test, not asked of the pool).
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
 * SERVICE_ENGINE_BASE_URL for a model listening on the host at `port`: Berth's model gateway forwards to it
 * from the host (engine containers never reach it themselves).
 */
export function modelUrlFromHost(port: number): string {
  return `http://127.0.0.1:${port}`;
}

/**
 * Removes what an instance's agent network left after its Berth stopped (Berth removes the network it
 * made itself unless a container still uses it): the network with its containers, and the instance's
 * nftables tables. Answers what was left.
 */
export async function removeAgentNetworkOf(instance: string): Promise<string[]> {
  const left: string[] = [];
  // The tables first: they name the network's bridge, and Podman gives a freed bridge name to the next
  // network it makes (another test Berth's), whose traffic a stale table would then refuse.
  for (const family of ['inet', 'bridge']) {
    const table = `berth-${instance}`;
    if (await exec('nft', ['list', 'table', family, table]).then(() => true, () => false)) {
      left.push(`nft table ${family} ${table}`);
      await exec('nft', ['delete', 'table', family, table]);
    }
  }
  const networks = (await exec('podman', ['network', 'ls', '--filter', `label=${INSTANCE_LABEL}=${instance}`, '--format', '{{.Name}}'])).stdout.split('\n').filter(Boolean);
  for (const network of networks) {
    left.push(`network ${network}`);
    await exec('podman', ['network', 'rm', '--force', network]);
  }
  return left;
}

/** A container as the podman CLI lists it. */
export interface ListedContainer {
  readonly name: string;
  /** created, running, exited, ... */
  readonly state: string;
  /** Seconds since the epoch. */
  readonly created: number;
}

/** The containers labelled `label=instance` (Berth's instance label by default), through the podman CLI. */
export async function containersOf(instance: string, label = INSTANCE_LABEL): Promise<ListedContainer[]> {
  const { stdout } = await exec('podman', ['ps', '--all', '--filter', `label=${label}=${instance}`, '--format', 'json']);
  const listed = JSON.parse(stdout || '[]') as { Names: string[]; Id: string; State: string; Created: number }[];
  return listed.map((c) => ({ name: c.Names[0] ?? c.Id, state: c.State, created: c.Created }));
}

/**
 * The containers beyond what the configured pools may hold: Berth's pool is not asked which are its own (that
 * would trust the code under test). A pooled engine is one Podman lists under the pool's name (`berth-pool-…`,
 * unclaimed) that has not ended (being made or waiting), and there are at most `poolCapacity` of them
 * (SERVICE_POOL_SIZE + SERVICE_AGENT_POOL_SIZE); every other container, every one that ended, and every live
 * one past that count (the newest kept as the pool's refills), is left over. A run's or agent's container
 * (`berth-run-…`, `berth-agent-…`) is never mistaken for the pool's.
 */
export function beyondThePool(containers: readonly ListedContainer[], poolCapacity: number): string[] {
  const live = containers.filter((c) => c.name.startsWith('berth-pool-') && ['created', 'configured', 'initialized', 'running'].includes(c.state));
  const pooled = new Set([...live].sort((a, b) => b.created - a.created).slice(0, poolCapacity).map((c) => c.name));
  return containers.filter((c) => !pooled.has(c.name)).map((c) => c.name);
}

/** The configuration of a test Berth: no auth or rate limit, ephemeral ports, state under `dir`. */
export function testEnvironment(dir: string, instance: string, port = 0): Record<string, string> {
  return {
    SERVICE_AUTH_ENABLED: 'false',
    SERVICE_RATE_LIMIT_ENABLED: 'false',
    SERVICE_ADDRESS: `127.0.0.1:${port}`,
    SERVICE_METRICS_ADDRESS: '127.0.0.1:0',
    SERVICE_OFFLINE_MODEL_PORT: '0',
    // Test Berths run side by side: each its own gateway port (its nftables rules name that one).
    SERVICE_GATEWAY_PORT: '0',
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
  /** Host names the egress proxy resolves to these addresses (local servers standing for outside hosts). */
  readonly egressHosts?: ReadonlyMap<string, string>;
}

export async function startTestBerth(env: Record<string, string> = {}, options: TestBerthOptions = {}): Promise<TestBerth> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
  const instance = `test-${randomBytes(4).toString('hex')}`;
  const config = loadConfig({ ...testEnvironment(dir, instance), ...env });
  const { onLog } = options;
  const logger = onLog
    ? pino({ level: config.logLevel, mixin: traceFields }, { write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>) })
    : pino({ level: config.logLevel, mixin: traceFields });
  let berth: RunningBerth;
  try {
    berth = await startBerth(config, logger, options.egressHosts ? { egressResolveOverride: options.egressHosts } : {});
  } catch (error) {
    // A start that failed has undone itself; its directory goes too.
    await removeTestDir(dir);
    throw error;
  }
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
      return beyondThePool(await containersOf(instance), config.pool.size + config.pool.agentSize);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await berth.stop();
      // Compose stacks outlive a stop (they belong to sessions); when this test Berth's sessions go with its
      // directory, its stacks go too, as the next start of the instance would remove them.
      if (config.agent.sessionsDir.startsWith(`${dir}/`)) await removeStacksOf(instance, join(config.agent.sessionsDir, '.stacks'));
      // Nothing of the instance outlives its stop: pooled engines, runs, agents and builds all go. Listed by
      // label through the podman CLI, not asked of the Berth under test.
      const containers = [...(await containersOf(instance)), ...(await containersOf(instance, IMAGE_TREE_LABEL))];
      if (containers.length > 0) await exec('podman', ['rm', '--force', ...containers.map((c) => c.name)]).catch(() => undefined);
      // Berth removes its agent network and nftables tables at stop when no container is left on it.
      const left = [...containers.map((c) => `container ${c.name} (${c.state})`), ...(await removeAgentNetworkOf(instance))];
      await removeTestDir(dir);
      if (left.length > 0) throw new Error(`the stopped Berth left ${left.join(', ')} (removed now)`);
    },
  };
}

/**
 * A metric's value from the Berth's metrics listener. A series that is not there throws: answering 0 would let
 * an `== 0` check pass for a metric that was renamed or never registered.
 */
export async function metric(t: TestBerth, name: string): Promise<number> {
  const text = await (await fetch(t.berth.metricsUrl)).text();
  const escaped = name.replace(/[{}"]/g, (c) => `\\${c}`);
  const match = new RegExp(`^${escaped} (\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)$`, 'm').exec(text);
  if (!match) throw new Error(`the metric ${name} is not exposed by the Berth (is it renamed, or its labels not pre-created?)`);
  return Number(match[1]);
}

/** Waits until the Berth's pool holds `count` ready engines (at most `withinMs`). */
export async function poolReady(t: TestBerth, count: number, pool: 'run' | 'agent' = 'run', withinMs = 30_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while ((await metric(t, `berth_pool_ready{pool="${pool}"}`)) < count) {
    if (Date.now() > deadline) throw new Error(`the ${pool} pool did not fill to ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
