// When SERVICE_PODMAN_SOCKET is unset Berth runs `podman system service` on a socket of its own,
// so it never depends on (or disturbs) a system-wide Podman service, starts it again should it die, and
// stops it on exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PodmanClient } from './client.js';

const PROJECT_CONTAINERS_CONF = fileURLToPath(new URL('../../../scripts/containers.conf', import.meta.url));

export interface PodmanService {
  readonly socketPath: string;
  stop(): Promise<void>;
}

export async function startPodmanService(runDir: string, log: (message: string) => void): Promise<PodmanService> {
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  const socketPath = join(runDir, 'podman.sock');
  const pidFile = join(runDir, 'podman.pid');
  await stopStaleService(pidFile, socketPath);
  let child = await spawnService(runDir, socketPath, pidFile);
  log(`podman service listening on ${socketPath}`);

  // Supervised: containers outlive a dead service (conmon keeps them), so Berth starts it again on the same
  // socket and its runs and agents follow their containers again (core/runtime-outage.ts).
  let stopping = false;
  let restarts = 0;
  const supervise = (current: ChildProcess) => {
    current.once('exit', (code, signal) => {
      if (stopping) return;
      restarts += 1;
      log(`podman service exited unexpectedly (${signal ?? `code ${code}`}); starting it again`);
      const again = async (attempt: number): Promise<void> => {
        if (stopping) return;
        try {
          child = await spawnService(runDir, socketPath, pidFile);
          supervise(child);
          log(`podman service listening on ${socketPath} again (restart ${restarts})`);
        } catch (error) {
          log(`podman service did not start again: ${(error as Error).message}; retrying`);
          await new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** attempt)));
          await again(attempt + 1);
        }
      };
      void again(0);
    });
  };
  supervise(child);

  return {
    socketPath,
    async stop() {
      stopping = true;
      const current = child;
      if (current.exitCode === null && current.signalCode === null) {
        const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
        current.kill('SIGTERM');
        const timer = setTimeout(() => current.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      await rm(socketPath, { force: true });
      await rm(pidFile, { force: true });
    },
  };
}

/** Starts `podman system service` on the socket and waits until it answers. */
async function spawnService(runDir: string, socketPath: string, pidFile: string): Promise<ChildProcess> {
  await rm(socketPath, { force: true });
  // Its own process group: Ctrl-C on Berth's terminal must not kill Podman before Berth has removed its
  // containers and secrets through it. Berth stops it last; a stale one is stopped at the next start.
  const child: ChildProcess = spawn('podman', ['system', 'service', '--time=0', `unix://${socketPath}`], {
    // conmon, started by the service for each container, writes a file named `oom` into its working
    // directory when the kernel OOM-kills a container: keep that in Berth's run directory, not wherever
    // Berth was started (a checkout would collect stray `oom` files).
    cwd: runDir,
    env: { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? PROJECT_CONTAINERS_CONF },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  child.unref();
  if (child.pid !== undefined) await writeFile(pidFile, String(child.pid));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const spawnError = new Promise<never>((_, reject) =>
    child.once('error', (error) => reject(new Error(`cannot start podman (is it installed? run 'make up' or scripts/setup.sh): ${error.message}`))),
  );

  const probe = new PodmanClient(socketPath);
  const deadline = Date.now() + 20_000;
  try {
    for (;;) {
      try {
        await Promise.race([probe.call('/_ping'), spawnError]);
        return child;
      } catch (error) {
        if (child.exitCode !== null || Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error(`podman system service did not start: ${(error as Error).message} ${stderr.trim()}`);
        }
        if ((error as Error).message.startsWith('cannot start podman')) throw error;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } finally {
    await probe.close();
  }
}

/** A service left by a Berth that was killed (SIGKILL) would otherwise live forever (--time=0). */
async function stopStaleService(pidFile: string, socketPath: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(await readFile(pidFile, 'utf8'));
  } catch {
    return;
  }
  try {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    if (cmdline.includes('system') && cmdline.includes(socketPath)) process.kill(pid, 'SIGTERM');
  } catch {
    // Already gone.
  }
  await rm(pidFile, { force: true });
}
