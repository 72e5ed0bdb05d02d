// Containers over Podman's libpod REST API: an engine's or a stack service's container from create to
// removal, its output attached or followed, its logs and health.
import type { Containers, AttachedContainer, ContainerExit, ContainerState, ContainerSummary, HealthStatus, LogTailOptions, OutputChunk } from '../ports/containers.js';
import type { ContainerSpec, ServiceContainerSpec } from '../ports/container-specs.js';
import { PodmanApiError, type PodmanClient } from './client.js';
import { logConfiguration, toServiceSpecGenerator, toSpecGenerator } from './container-spec.js';
import { removeContainer } from './container-removal.js';
import { demultiplex } from './multiplexed-stream.js';
import { kernelLoggedOomKill } from '../kernel-oom-log.js';
import type { BridgeAddresses } from './bridge-address.js';
import { readFile } from 'node:fs/promises';

interface LibpodInspect {
  Id?: string;
  State: { ExitCode: number; OOMKilled: boolean; Status: string; Running?: boolean; StartedAt?: string; Pid?: number };
}

interface LibpodContainer {
  Id: string;
  Names?: string[];
  Labels?: Record<string, string> | null;
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux, whatever the kernel's HZ). */
const USER_HZ = 100;

/** utime + stime of a process, in seconds; undefined once it is gone. */
async function processCpuSeconds(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return undefined;
  // The fields after the command's name (which may hold spaces and parentheses): state is the 3rd field.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

/** Networks a container joins that may be bridges on this host (not `none`, not the host's own). */
function joinedNetworks(...networks: (string | undefined)[]): string[] {
  return networks.filter((name): name is string => name !== undefined && name !== 'none' && name !== 'host');
}

export class PodmanContainers implements Containers {
  /** The networks of each container created here, to fix their bridges' addresses once it started. */
  readonly #networksOf = new Map<string, string[]>();
  readonly #client: PodmanClient;
  readonly #bridges: BridgeAddresses;
  /** Every container's log is capped at this size (SERVICE_CONTAINER_LOG_MAX_BYTES); undefined: Podman's default. */
  readonly #logMaxBytes: number | undefined;

  constructor(client: PodmanClient, bridges: BridgeAddresses, logMaxBytes: number | undefined) {
    this.#client = client;
    this.#bridges = bridges;
    this.#logMaxBytes = logMaxBytes;
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    const created = await this.#client.json<{ Id: string }>('/containers/create', { method: 'POST', json: { ...toSpecGenerator(spec), ...logConfiguration(this.#logMaxBytes) } });
    const networks = joinedNetworks(spec.network, spec.stackNetwork?.name);
    if (networks.length > 0) this.#networksOf.set(created.Id, networks);
    return created.Id;
  }

  async createServiceContainer(spec: ServiceContainerSpec): Promise<string> {
    const created = await this.#client.json<{ Id: string }>('/containers/create', { method: 'POST', json: { ...toServiceSpecGenerator(spec), ...logConfiguration(this.#logMaxBytes) } });
    const networks = spec.privileges.hostNetwork ? [] : joinedNetworks(spec.network?.name);
    if (networks.length > 0) this.#networksOf.set(created.Id, networks);
    return created.Id;
  }

  async startContainer(id: string): Promise<void> {
    await this.#client.call(`/containers/${id}/start`, { method: 'POST', accept: [304] });
    // The first container on a bridge brings the bridge up: its address is fixed from then on.
    const networks = this.#networksOf.get(id);
    if (networks) await this.#bridges.pin(networks);
  }

  async setCpuShares(id: string, shares: number): Promise<void> {
    await this.#client.call(`/containers/${id}/update`, { method: 'POST', json: { cpu: { shares } } });
  }

  async *followOutput(id: string, signal: AbortSignal): AsyncIterable<OutputChunk> {
    const response = await this.#client.request(`/containers/${id}/logs`, {
      query: { follow: true, stdout: true, stderr: true },
      signal,
    });
    try {
      yield* demultiplex(response.body as AsyncIterable<Buffer>);
    } catch (error) {
      if (!signal.aborted) throw error;
    }
  }

  async attachOutput(id: string): Promise<{ readonly output: AsyncIterable<OutputChunk>; close(): void }> {
    // Podman follows a container's log file by polling (every 250 ms in 4.3), which made every run wait
    // about half a second for its first and last lines; attach streams them as the engine writes.
    const { output, close } = await this.#attachStreams(id, false);
    return { output, close };
  }

  async attach(id: string): Promise<AttachedContainer> {
    return this.#attachStreams(id, true);
  }

  /** One hijacked attach connection: stdout/stderr demultiplexed, and stdin when asked for. */
  async #attachStreams(id: string, stdin: boolean): Promise<AttachedContainer> {
    const socket = await this.#client.upgrade(`/containers/${id}/attach`, { stdin, stdout: true, stderr: true, stream: true });
    // Without a TTY the hijacked stream is Docker-multiplexed; ending the write side closes the container's stdin.
    // A write after the container ended fails with EPIPE: the end is reported by `output`, not as a crash.
    socket.on('error', () => undefined);
    return {
      stdin: socket,
      output: (async function* () {
        try {
          yield* demultiplex(socket as AsyncIterable<Buffer>);
        } catch (error) {
          // close() destroys the socket on purpose; that is an end, not a failure.
          if (!socket.destroyed) throw error;
        }
      })(),
      close: () => socket.destroy(),
    };
  }

  async inspectContainer(nameOrId: string): Promise<ContainerState | undefined> {
    const inspect = await this.#client.jsonIfFound<LibpodInspect>(`/containers/${encodeURIComponent(nameOrId)}/json`);
    if (!inspect) return undefined;
    const startedAtMs = Date.parse(inspect.State.StartedAt ?? '');
    return {
      id: inspect.Id ?? nameOrId,
      running: inspect.State.Running === true || inspect.State.Status === 'running',
      startedAtMs: Number.isNaN(startedAtMs) || startedAtMs <= 0 ? undefined : startedAtMs,
      exit: {
        exitCode: inspect.State.ExitCode,
        // Podman reports OOM kills on cgroup v2 only; a SIGKILL exit elsewhere is looked up in the kernel's log.
        oomKilled: inspect.State.OOMKilled || (inspect.State.ExitCode === 137 && inspect.Id ? kernelLoggedOomKill(inspect.Id) : false),
      },
    };
  }

  async mainProcessCpu(id: string): Promise<(() => Promise<number | undefined>) | undefined> {
    const inspect = await this.#client.jsonIfFound<LibpodInspect>(`/containers/${encodeURIComponent(id)}/json`);
    const pid = inspect?.State.Pid;
    if (pid === undefined || pid <= 0) return undefined;
    return () => processCpuSeconds(pid);
  }

  async waitContainer(id: string): Promise<ContainerExit> {
    await this.#client.call(`/containers/${id}/wait`, { method: 'POST', query: { condition: 'exited' } });
    const state = await this.inspectContainer(id);
    if (!state) throw new PodmanApiError(404, `Podman: container ${id} is gone before its exit could be read`);
    return state.exit;
  }

  async renameContainer(id: string, name: string): Promise<boolean> {
    // 404: gone already (a short run's container is removed before it would be renamed).
    return (await this.#client.call(`/containers/${id}/rename`, { method: 'POST', query: { name }, accept: [404] })) !== 404;
  }

  async killContainer(id: string, signal = 'SIGKILL'): Promise<void> {
    // 404: already gone; 409: not running any more. Both mean there is nothing left to kill.
    await this.#client.call(`/containers/${id}/kill`, { method: 'POST', query: { signal }, accept: [404, 409] });
  }

  async removeContainer(id: string): Promise<void> {
    this.#networksOf.delete(id);
    await removeContainer(this.#client, id);
  }

  async listContainers(label: string): Promise<ContainerSummary[]> {
    const containers = await this.#client.json<LibpodContainer[]>('/containers/json', {
      query: { all: true, filters: JSON.stringify({ label: [label] }) },
    });
    return containers.map((c) => ({ id: c.Id, names: c.Names ?? [], labels: c.Labels ?? {} }));
  }

  async runHealthcheck(id: string): Promise<HealthStatus> {
    // Podman schedules healthchecks with systemd timers, which a host without systemd does not have; Berth
    // runs each check itself through this call, which also records the status Podman reports.
    const result = await this.#client.json<{ Status?: string }>(`/containers/${id}/healthcheck`);
    const status = result.Status;
    return status === 'healthy' || status === 'unhealthy' ? status : 'starting';
  }

  async logTail(id: string, lines: number, options: LogTailOptions = {}): Promise<string> {
    const since = options.sinceMs === undefined ? {} : { since: new Date(options.sinceMs).toISOString() };
    const response = await this.#client.request(`/containers/${id}/logs`, { query: { stdout: true, stderr: true, tail: lines, ...since } });
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of demultiplex(response.body as AsyncIterable<Buffer>)) {
      chunks.push(chunk.data);
      bytes += chunk.data.length;
      // Breaking out of the loop ends the response: the rest of the log is never read.
      if (options.maxBytes !== undefined && bytes >= options.maxBytes) break;
    }
    return Buffer.concat(chunks).subarray(0, options.maxBytes).toString('utf8');
  }
}
