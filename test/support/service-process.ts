// Berth as a child process (`src/main.ts`), so that a test can kill it (SIGKILL, SIGTERM) mid-work and
// start it again on the same data directory, as an operator would. The model lives outside the service, as
// a real model endpoint does, so that runs and agents keep talking to it while the service is down.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { modelUrlFromHost, removeAgentNetworkOf, testEnvironment } from './berth.js';
import { waitFor } from './wait.js';
import { removeTestDir } from './test-dir.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A free port below the kernel's ephemeral range (32768-60999 here), for a port the service binds again at
 * every restart: a port taken from the ephemeral range can be handed to another process's connection or
 * port-0 listener between two starts (seen: the gateway's restart failed with EADDRINUSE while the other
 * test shard ran), one outside it only to a process that names it.
 */
async function stablePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '0.0.0.0', () => resolve(true));
    });
    if (bound) {
      await new Promise((resolve) => server.close(resolve));
      return port;
    }
  }
  throw new Error('no free port between 20000 and 32000');
}

/** A stuck engine seen from the host: its processes' kernel waits, open descriptors, connections and a short trace. */
function engineState(pidText: string): string {
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return `(no pid: ${pidText})`;
  const run = (command: string, args: string[]) => {
    try {
      return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).trim();
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string; message: string };
      return `${failed.stdout ?? ''}${failed.stderr ?? ''}`.trim() || `(${command} failed: ${failed.message.split('\n')[0]})`;
    }
  };
  return [
    run('ps', ['-o', 'pid,stat,wchan:30,etime,time,args', '--ppid', String(pid), '-p', String(pid)]),
    `threads' waits: ${run('sh', ['-c', `for t in /proc/${pid}/task/*; do printf '%s ' "$(cat $t/wchan)"; done`])}`,
    `descriptors: ${run('sh', ['-c', `ls -l /proc/${pid}/fd | awk '{print $NF}' | sort | uniq -c | sort -rn | head -20 | tr '\n' ';'`])}`,
    `connections: ${run('nsenter', ['-t', String(pid), '-n', 'ss', '-tanpi'])}`,
    `its network: ${run('nsenter', ['-t', String(pid), '-n', 'sh', '-c', 'ip -o link; ip neigh; ip route; ping -c1 -W1 "$(ip route | awk \'/default/ {print $3}\')" | tail -2'])}`,
    `host bridge ports: ${run('sh', ['-c', 'ip -o link show type bridge; ip -o link show type veth'])}`,
    `trace (3 s): ${run('sh', ['-c', `command -v strace >/dev/null || { echo no strace; exit 0; }; timeout 3 strace -f -tt -s 120 -p ${pid} 2>&1 | tail -40`])}`,
  ].join('\n');
}

export interface ServiceProcess {
  readonly instance: string;
  readonly dir: string;
  url(): string;
  start(env?: Record<string, string>): Promise<void>;
  /** A signal to the service's process group; resolves when it exited (SIGKILL after 30 s otherwise). */
  signal(signal: NodeJS.Signals): Promise<void>;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Names of the instance's containers, through the podman CLI (also while the service is down). */
  containers(): string[];
  output(): string;
  /**
   * What a test reports when an agent's turn does not end: the container's last log lines (did the engine
   * print its result?), its processes, the model's requests and the service's warnings.
   */
  diagnose(agentId: string): string;
  /** Kills the service and removes everything of the instance: containers, secret, model, directory. */
  dispose(): Promise<void>;
}

export async function serviceProcess(baseEnv: Record<string, string> = {}): Promise<ServiceProcess> {
  const instance = `test-svc-${randomBytes(4).toString('hex')}`;
  const dir = await mkdtemp(join(tmpdir(), 'berth-svc-'));
  const modelKey = `sk-berth-test-${randomBytes(12).toString('hex')}`;
  const modelSecret = `test-svc-model-key-${randomBytes(4).toString('hex')}`;
  const modelLog: string[] = [];
  const model: OfflineModel = await startOfflineModel({
    host: '0.0.0.0',
    port: 0,
    apiKey: modelKey,
    log: (line) => {
      modelLog.push(`${new Date().toISOString()} ${line}`);
      if (modelLog.length > 30) modelLog.shift();
    },
  });
  execFileSync('sh', ['-c', `printf '%s' "$KEY" | podman secret create ${modelSecret} -`], { env: { ...process.env, KEY: modelKey } });
  const modelUrl = modelUrlFromHost(model.port);
  // The gateway's port is the same at every start: containers that outlive a restart (jobs, agents) keep
  // the gateway URL they were made with.
  const gatewayPort = await stablePort();
  let child: ChildProcess | undefined;
  let url = '';
  let output = '';

  const service: ServiceProcess = {
    instance,
    dir,
    url: () => url,
    output: () => output,
    async start(env = {}) {
      // A test that failed with its service still running must not leave it behind the next start's back
      // (its output pipes would keep the test file from ever ending).
      if (child && child.exitCode === null && child.signalCode === null) {
        const previous = child;
        const gone = new Promise((resolve) => previous.once('exit', resolve));
        try {
          process.kill(-previous.pid!, 'SIGKILL');
          await gone;
        } catch {
          // Exited between the check and the kill.
        }
      }
      const port = await freePort();
      url = `http://127.0.0.1:${port}`;
      // The previous process's last words stay (a fault's diagnosis needs the process that met it).
      if (output !== '') output = `${output.slice(-20_000)}\n--- started again ---\n`;
      const current = (child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
        cwd: join(import.meta.dirname, '../..'),
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          ...testEnvironment(dir, instance, port),
          SERVICE_OFFLINE_MODEL: 'false',
          SERVICE_ENGINE_CREDENTIALS_SECRET: modelSecret,
          SERVICE_ENGINE_BASE_URL: modelUrl,
          SERVICE_GATEWAY_PORT: String(gatewayPort),
          SERVICE_LOG_LEVEL: 'info',
          ...baseEnv,
          ...env,
        },
      }));
      // A test runner that dies (a timeout, Ctrl-C) must not leave the service running on its own.
      const orphaned = () => {
        try {
          process.kill(-current.pid!, 'SIGKILL');
        } catch {
          // Already gone.
        }
      };
      process.once('exit', orphaned);
      child.once('exit', () => process.off('exit', orphaned));
      child.stdout!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-50_000)));
      child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-50_000)));
      await waitFor('the service to answer', async () => {
        if (current.exitCode !== null) throw new Error(`the service exited with ${current.exitCode}: ${output}`);
        return (await fetch(`${url}/health`)).ok || undefined;
      }, 90_000, 200).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}\n${output}`);
      });
    },
    async signal(signal) {
      const current = child;
      if (!current || current.exitCode !== null || current.signalCode !== null) return;
      const exited = new Promise((resolve) => current.once('exit', resolve));
      process.kill(-current.pid!, signal);
      await Promise.race([exited, delay(60_000, undefined, { ref: false })]);
      try {
        process.kill(-current.pid!, 'SIGKILL');
      } catch {
        // The group has exited.
      }
    },
    async api(method, path, body) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON.
      }
      return { status: response.status, body: parsed as any };
    },
    containers: () =>
      execFileSync('podman', ['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}'], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.trim() !== ''),
    diagnose(agentId) {
      const podman = (...args: string[]) => {
        try {
          return execFileSync('podman', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).trim();
        } catch (error) {
          return `(podman ${args[0]} failed: ${(error as Error).message.split('\n')[0]})`;
        }
      };
      const container = service.containers().find((name) => name.endsWith(agentId.replace(/^agent-/, '')) || name.endsWith(agentId));
      const warnings = output.split('\n').filter((line) => /"level":[4-6]0/.test(line)).slice(-15);
      return [
        `now ${new Date().toISOString()}; agent ${agentId}, container ${container ?? '(none)'}`,
        container ? `its log (last lines, timestamped):\n${podman('logs', '-t', '--tail', '6', container).slice(-3000)}` : '',
        container ? `its engine:\n${engineState(podman('inspect', '-f', '{{.State.Pid}}', container))}` : '',
        `the model's last requests:\n${modelLog.join('\n')}`,
        `the service's warnings:\n${warnings.join('\n')}`,
      ].join('\n');
    },
    async dispose() {
      await service.signal('SIGKILL');
      const holders = execFileSync('podman', ['ps', '-aq', '--filter', `label=berth.image-tree=${instance}`], { encoding: 'utf8' });
      for (const id of [...service.containers(), ...holders.split('\n').filter(Boolean)]) {
        try {
          execFileSync('podman', ['rm', '-f', id], { stdio: 'ignore' });
        } catch {
          // Already gone.
        }
      }
      await model.close();
      try {
        execFileSync('podman', ['secret', 'rm', modelSecret], { stdio: 'ignore' });
      } catch {
        // Already gone.
      }
      try {
        process.kill(Number(await readFile(join(dir, 'data', 'podman', 'podman.pid'), 'utf8')), 'SIGTERM');
      } catch {
        // No Podman service left behind.
      }
      // A killed Berth cannot delete its agent network or its nftables tables (network isolation): the next
      // start of the same instance would reuse and replace them, and this instance has none.
      await removeAgentNetworkOf(instance);
      await removeTestDir(dir);
    },
  };
  return service;
}
