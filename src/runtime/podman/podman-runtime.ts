// ContainerRuntime over Podman's libpod REST API.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type {
  AttachedContainer,
  ContainerExit,
  ContainerRuntime,
  ContainerState,
  ContainerSpec,
  ContainerSummary,
  ImageInfo,
  ImageSummary,
  MountedImageTree,
  OutputChunk,
  PulledImage,
  PullOptions,
  RegistrySearchResult,
} from '../container-runtime.js';
import type { AgentNetwork, BuildOptions, HealthStatus, LabelledObject, LogTailOptions, NetworkSummary, ServiceContainerSpec, StackNetwork } from '../container-runtime.js';
import { PROBE_LABEL, RegistryError, RuntimeError } from '../container-runtime.js';
import { buildImage } from './image-build.js';
import { PodmanApiError, PodmanClient } from './client.js';
import { logConfiguration, toServiceSpecGenerator, toSpecGenerator } from './container-spec.js';
import { demultiplex } from './multiplexed-stream.js';
import { bindVolumeData, unbindVolumeData } from './volume-backing.js';
import { isRegistryNotFound, readPullStream } from './pull-stream.js';
import { kernelLoggedOomKill } from '../kernel-oom-log.js';
import { BridgeAddresses } from './bridge-address.js';
import { createBridgeWithGateway, ensureAgentNetwork, releaseAgentNetwork } from './agent-network.js';
import type { AgentBridge, NetworkIsolation } from './network-isolation.js';

interface LibpodInspect {
  Id?: string;
  State: { ExitCode: number; OOMKilled: boolean; Status: string; Running?: boolean; StartedAt?: string };
}

interface LibpodImage {
  Id: string;
  RepoTags?: string[] | null;
  Size?: number;
  Config?: { User?: string; Labels?: Record<string, string> | null; Env?: string[] | null };
  Labels?: Record<string, string> | null;
}

interface LibpodImageSummary {
  Id: string;
  RepoTags?: string[] | null;
  Size?: number;
  Labels?: Record<string, string> | null;
}

interface LibpodSearchResult {
  Name: string;
  Description?: string;
  Stars?: number;
  Official?: string;
}

interface LibpodContainer {
  Id: string;
  Names?: string[];
  Labels?: Record<string, string> | null;
}

interface LibpodSecret {
  Spec: { Name: string };
}

/** What a container gets as PATH when its image sets none (Podman's default). */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Networks a container joins that may be bridges on this host (not `none`, not the host's own). */
function joinedNetworks(...networks: (string | undefined)[]): string[] {
  return networks.filter((name): name is string => name !== undefined && name !== 'none' && name !== 'host');
}

export class PodmanRuntime implements ContainerRuntime {
  /** The networks of each container created here, to fix their bridges' addresses once it started. */
  private readonly networksOf = new Map<string, string[]>();
  private readonly bridges: BridgeAddresses;
  /** Set by isolateNetworks (rootful): stack bridges are added to it as their networks are created. */
  private isolation: NetworkIsolation | undefined;
  /** Stack networks are created and removed one at a time: a removed bridge's name is soon reused. */
  private networkChanges: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly client: PodmanClient,
    warn: (details: Record<string, unknown>, message: string) => void = () => undefined,
    /** Every container's log is capped at this size (SERVICE_CONTAINER_LOG_MAX_BYTES); undefined: Podman's default. */
    private readonly logMaxBytes?: number,
    /** A local image with /bin/sh whose containers readSecret creates (never starts) to read a secret. */
    private readonly secretReaderImage?: string,
  ) {
    this.bridges = new BridgeAddresses({
      interfaceOf: async (network) => {
        const inspect = await this.client.jsonIfFound<{ driver?: string; network_interface?: string }>(`/networks/${encodeURIComponent(network)}/json`);
        return inspect?.driver === 'bridge' ? inspect.network_interface : undefined;
      },
      warn,
    });
  }

  async ping(): Promise<void> {
    await this.client.call('/_ping');
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    const created = await this.client.json<{ Id: string }>('/containers/create', { method: 'POST', json: { ...toSpecGenerator(spec), ...logConfiguration(this.logMaxBytes) } });
    const networks = joinedNetworks(spec.network, spec.stackNetwork?.name);
    if (networks.length > 0) this.networksOf.set(created.Id, networks);
    return created.Id;
  }

  async startContainer(id: string): Promise<void> {
    await this.client.call(`/containers/${id}/start`, { method: 'POST', accept: [304] });
    // The first container on a bridge brings the bridge up: its address is fixed from then on.
    const networks = this.networksOf.get(id);
    if (networks) await this.bridges.pin(networks);
  }

  async setCpuShares(id: string, shares: number): Promise<void> {
    await this.client.call(`/containers/${id}/update`, { method: 'POST', json: { cpu: { shares } } });
  }

  async *followOutput(id: string, signal: AbortSignal): AsyncIterable<OutputChunk> {
    const response = await this.client.request(`/containers/${id}/logs`, {
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
    const { output, close } = await this.attachStreams(id, false);
    return { output, close };
  }

  async attach(id: string): Promise<AttachedContainer> {
    return this.attachStreams(id, true);
  }

  /** One hijacked attach connection: stdout/stderr demultiplexed, and stdin when asked for. */
  private async attachStreams(id: string, stdin: boolean): Promise<AttachedContainer> {
    const socket = await this.client.upgrade(`/containers/${id}/attach`, { stdin, stdout: true, stderr: true, stream: true });
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
    const inspect = await this.client.jsonIfFound<LibpodInspect>(`/containers/${encodeURIComponent(nameOrId)}/json`);
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

  async waitContainer(id: string): Promise<ContainerExit> {
    await this.client.call(`/containers/${id}/wait`, { method: 'POST', query: { condition: 'exited' } });
    const state = await this.inspectContainer(id);
    if (!state) throw new PodmanApiError(404, `Podman: container ${id} is gone before its exit could be read`);
    return state.exit;
  }

  async renameContainer(id: string, name: string): Promise<boolean> {
    // 404: gone already (a short run's container is removed before it would be renamed).
    return (await this.client.call(`/containers/${id}/rename`, { method: 'POST', query: { name }, accept: [404] })) !== 404;
  }

  async killContainer(id: string, signal = 'SIGKILL'): Promise<void> {
    // 404: already gone; 409: not running any more. Both mean there is nothing left to kill.
    await this.client.call(`/containers/${id}/kill`, { method: 'POST', query: { signal }, accept: [404, 409] });
  }

  async removeContainer(id: string): Promise<void> {
    // Podman 4.3 sometimes answers a removal of a container that ran in a user namespace with `unlinkat
    // …/userdata/shm: device or resource busy` while the kernel is still tearing the container's mounts
    // down; the container is removed all the same a moment later. Such answers are retried (a retry finds
    // it gone: 404) rather than reported as a failed removal.
    this.networksOf.delete(id);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.call(`/containers/${id}`, {
          method: 'DELETE',
          query: { force: true, v: true, timeout: 0 },
          accept: [404],
        });
        return;
      } catch (error) {
        const busy = error instanceof PodmanApiError && error.statusCode === 500 && /device or resource busy/.test(error.message);
        if (!busy || attempt >= 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
      }
    }
  }

  async listContainers(label: string): Promise<ContainerSummary[]> {
    const containers = await this.client.json<LibpodContainer[]>('/containers/json', {
      query: { all: true, filters: JSON.stringify({ label: [label] }) },
    });
    return containers.map((c) => ({ id: c.Id, names: c.Names ?? [], labels: c.Labels ?? {} }));
  }

  // Podman 4.3 shares one mount of an image among the containers that mount it (`type=image`) and
  // sometimes unmounts it while another container of the same image is being removed, so a concurrent
  // start fails with `lowerdir=…/merged: no such file or directory`. A container of the image's own,
  // created and never started, mounted once and held, gives a tree whose mount nobody else counts.
  async mountImageTree(image: string, holder: { readonly name: string; readonly labels: Readonly<Record<string, string>> }): Promise<MountedImageTree> {
    await this.removeContainer(holder.name);
    const created = await this.client.json<{ Id: string }>('/containers/create', {
      method: 'POST',
      json: {
        name: holder.name,
        image,
        command: ['/berth-image-tree-never-started'],
        labels: holder.labels,
        oci_runtime: 'runc',
        netns: { nsmode: 'none' },
      },
    });
    try {
      // Podman 4.3 answers with the bare path (not a JSON string, whatever its content type says).
      const response = await this.client.request(`/containers/${created.Id}/mount`, { method: 'POST' });
      const text = (await response.body.text()).trim();
      const mounted = text.startsWith('"') ? (JSON.parse(text) as string) : text;
      if (!mounted.startsWith('/')) throw new Error(`Podman answered the mount of ${image} with ${JSON.stringify(text.slice(0, 200))}`);
      return { path: mounted, release: () => this.removeContainer(created.Id) };
    } catch (error) {
      await this.removeContainer(created.Id).catch(() => undefined);
      throw error;
    }
  }

  async inspectImage(reference: string): Promise<ImageInfo | undefined> {
    const image = await this.client.jsonIfFound<LibpodImage>(`/images/${encodeURIComponent(reference)}/json`);
    if (!image) return undefined;
    return {
      id: image.Id,
      user: image.Config?.User ?? '',
      path: (image.Config?.Env ?? []).find((entry) => entry.startsWith('PATH='))?.slice('PATH='.length) ?? DEFAULT_PATH,
      repoTags: image.RepoTags ?? [],
      size: image.Size ?? 0,
      labels: image.Labels ?? image.Config?.Labels ?? {},
    };
  }

  async existingImagePaths(reference: string, paths: readonly string[]): Promise<Set<string>> {
    return this.withProbe(reference, async (probe) => {
      const found = await Promise.all(paths.map(async (path) => ((await this.probeHasPath(probe, path)) ? [path] : [])));
      return new Set(found.flat());
    });
  }

  async listImages(): Promise<ImageSummary[]> {
    const images = await this.client.json<LibpodImageSummary[]>('/images/json');
    return images.map((i) => ({ id: i.Id, repoTags: i.RepoTags ?? [], size: i.Size ?? 0, labels: i.Labels ?? {} }));
  }

  async pullImage(reference: string, options: PullOptions): Promise<PulledImage> {
    let response;
    try {
      response = await this.client.request('/images/pull', {
        method: 'POST',
        query: {
          reference,
          tlsVerify: options.tlsVerify,
          quiet: options.quiet,
          OS: options.platform?.os,
          Arch: options.platform?.arch,
          Variant: options.platform?.variant,
        },
        signal: options.signal,
      });
      // Closing the request stops the pull in Podman too: it pulls under the request's context.
      return await readPullStream(response.body as AsyncIterable<Buffer>, options.onProgress);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      throw this.registryError(error);
    }
  }

  async searchImages(term: string, options: { readonly limit: number; readonly tlsVerify: boolean }): Promise<RegistrySearchResult[]> {
    let results: LibpodSearchResult[];
    try {
      results = await this.client.json<LibpodSearchResult[]>('/images/search', {
        query: { term, limit: options.limit, tlsVerify: options.tlsVerify },
      });
    } catch (error) {
      throw this.registryError(error);
    }
    return results.map((r) => ({
      name: r.Name,
      description: r.Description ?? '',
      stars: r.Stars ?? 0,
      official: r.Official === '[OK]',
    }));
  }

  /** Podman's answer about a registry as a RegistryError; an unreachable Podman stays what it is. */
  private registryError(error: unknown): unknown {
    if (!(error instanceof PodmanApiError) || error.statusCode === 0) return error;
    return new RegistryError(error.message, error.statusCode === 404 || isRegistryNotFound(error.message), { cause: error });
  }

  private async probeHasPath(probeId: string, path: string): Promise<boolean> {
    const status = await this.client.call(`/containers/${probeId}/archive`, { method: 'HEAD', query: { path }, accept: [404] });
    return status === 200;
  }

  private async withProbe<T>(reference: string, use: (probeId: string) => Promise<T>): Promise<T> {
    // The archive endpoint needs a container; a created (never started) one costs a few ms and no process.
    const probe = await this.client.json<{ Id: string }>('/containers/create', {
      method: 'POST',
      json: {
        name: `berth-probe-${randomBytes(6).toString('hex')}`,
        image: reference,
        command: ['/probe-never-started'],
        labels: { [PROBE_LABEL]: '1' },
        oci_runtime: 'runc',
        netns: { nsmode: 'none' },
      },
    });
    try {
      return await use(probe.Id);
    } finally {
      await this.removeContainer(probe.Id);
    }
  }

  async networkSubnets(name: string): Promise<string[]> {
    if (name === 'none') return [];
    const network = await this.client.json<{ subnets?: { subnet: string }[] | null }>(`/networks/${encodeURIComponent(name)}/json`);
    return (network.subnets ?? []).map((s) => s.subnet);
  }

  async networkGateways(name: string): Promise<string[]> {
    if (name === 'none') return [];
    const network = await this.client.json<{ subnets?: { gateway?: string }[] | null }>(`/networks/${encodeURIComponent(name)}/json`);
    return (network.subnets ?? []).flatMap((s) => (s.gateway ? [s.gateway] : []));
  }

  async secretId(name: string): Promise<string | undefined> {
    // Podman resolves a secret by name, by full id or by a unique id prefix; only an exact name counts here,
    // or `secrets_env: {"X": "3"}` would reach whichever secret's id starts with 3 (Berth's own included).
    // (At creation Podman looks names up before ids, so the exact name found here is the one mounted.)
    const secret = await this.client.jsonIfFound<LibpodSecret & { ID?: string }>(`/secrets/${encodeURIComponent(name)}/json`);
    return secret?.Spec.Name === name ? (secret.ID ?? '') : undefined;
  }

  async secretExists(name: string): Promise<boolean> {
    return (await this.secretId(name)) !== undefined;
  }

  async listSecrets(): Promise<string[]> {
    const secrets = await this.client.json<LibpodSecret[]>('/secrets/json');
    return secrets.map((s) => s.Spec.Name).sort();
  }

  async createSecret(name: string, value: string): Promise<void> {
    await this.client.call('/secrets/create', {
      method: 'POST',
      query: { name },
      body: Buffer.from(value, 'utf8'),
      contentType: 'application/octet-stream',
    });
  }

  async readSecret(name: string): Promise<string> {
    // Podman 4.3 has no API that shows a secret's value (`--showsecret` came in 4.5). A container that
    // mounts it as a file is created and initialised, never started: Podman writes the secret's files into
    // the container's static directory at init, read here on the host; the container goes at once. Only
    // an image that has /bin/sh passes init (runc checks the command exists); nothing in it ever runs.
    if (!this.secretReaderImage) throw new RuntimeError(`secret ${name} cannot be read: no image is configured to read it with`, false);
    if ((await this.secretId(name)) === undefined) throw new RuntimeError(`Podman secret ${name} does not exist`, false);
    const created = await this.client.json<{ Id: string }>('/containers/create', {
      method: 'POST',
      json: {
        name: `berth-secret-read-${randomBytes(6).toString('hex')}`,
        image: this.secretReaderImage,
        command: ['/bin/sh'],
        labels: { [PROBE_LABEL]: '1' },
        oci_runtime: 'runc',
        netns: { nsmode: 'none' },
        secrets: [{ Source: name, Target: name, Mode: 0o400 }],
      },
    });
    try {
      await this.client.call(`/containers/${created.Id}/init`, { method: 'POST', accept: [304] });
      const inspect = await this.client.json<{ StaticDir?: string }>(`/containers/${created.Id}/json`);
      if (!inspect.StaticDir) throw new RuntimeError(`Podman did not say where container ${created.Id} keeps its files`, false);
      return await readFile(join(inspect.StaticDir, 'secrets', name), 'utf8');
    } finally {
      await this.removeContainer(created.Id);
    }
  }

  async removeSecret(name: string): Promise<void> {
    await this.client.call(`/secrets/${encodeURIComponent(name)}`, { method: 'DELETE', accept: [404] });
  }

  async createServiceContainer(spec: ServiceContainerSpec): Promise<string> {
    const created = await this.client.json<{ Id: string }>('/containers/create', { method: 'POST', json: { ...toServiceSpecGenerator(spec), ...logConfiguration(this.logMaxBytes) } });
    const networks = spec.privileges.hostNetwork ? [] : joinedNetworks(spec.network?.name);
    if (networks.length > 0) this.networksOf.set(created.Id, networks);
    return created.Id;
  }

  async runHealthcheck(id: string): Promise<HealthStatus> {
    // Podman schedules healthchecks with systemd timers, which a host without systemd does not have; Berth
    // runs each check itself through this call, which also records the status Podman reports.
    const result = await this.client.json<{ Status?: string }>(`/containers/${id}/healthcheck`);
    const status = result.Status;
    return status === 'healthy' || status === 'unhealthy' ? status : 'starting';
  }

  async logTail(id: string, lines: number, options: LogTailOptions = {}): Promise<string> {
    const since = options.sinceMs === undefined ? {} : { since: new Date(options.sinceMs).toISOString() };
    const response = await this.client.request(`/containers/${id}/logs`, { query: { stdout: true, stderr: true, tail: lines, ...since } });
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

  async buildImage(options: BuildOptions): Promise<string> {
    await buildImage(this.client, options);
    const image = await this.inspectImage(options.tag);
    if (!image) throw new RuntimeError(`the build ended without an image tagged ${options.tag}`, false);
    return image.id;
  }

  async removeImage(reference: string): Promise<boolean> {
    const status = await this.client.call(`/images/${encodeURIComponent(reference)}`, { method: 'DELETE', accept: [404, 409] });
    return status !== 409;
  }

  async createNetwork(name: string, labels: Readonly<Record<string, string>>): Promise<StackNetwork> {
    // Internal: no default route, so a stack's services reach nothing outside their network (its gateway,
    // the host, is closed by the network isolation but for Berth's gateway port). No DNS: aardvark-dns would
    // forward every name it does not know to the host's resolvers, a way out for data (docs/egress.md).
    return this.oneNetworkChange(async () => {
      const created = await createBridgeWithGateway(this.client, name, labels, true, { adoptExisting: false });
      try {
        const [first] = created.subnets;
        if (!first || created.subnets.length !== 1) throw new RuntimeError(`the network ${name} got ${created.subnets.length} IPv4 subnets with a gateway, not one`, false);
        if (this.isolation) {
          if (!created.network_interface) throw new RuntimeError(`the network ${name} has no bridge on this host to isolate`, false);
          await this.isolation.isolate(created.network_interface);
        }
        return { subnet: first.subnet, gateway: first.gateway };
      } catch (error) {
        await this.deleteNetwork(name).catch(() => undefined);
        throw error;
      }
    });
  }

  async removeNetwork(name: string): Promise<void> {
    this.bridges.forget(name);
    await this.oneNetworkChange(async () => {
      const bridge = this.isolation ? await this.bridgeOf(name) : undefined;
      await this.deleteNetwork(name);
      if (bridge) await this.isolation?.release(bridge.interfaceName);
    });
  }

  async ensureAgentNetwork(name: string, labels: Readonly<Record<string, string>>, options: { readonly internal: boolean }): Promise<AgentNetwork> {
    return this.oneNetworkChange(() => ensureAgentNetwork(this.client, name, labels, options.internal));
  }

  async releaseAgentNetwork(name: string): Promise<boolean> {
    this.bridges.forget(name);
    return this.oneNetworkChange(() => releaseAgentNetwork(this.client, name));
  }

  private async deleteNetwork(name: string): Promise<void> {
    await this.client.call(`/networks/${encodeURIComponent(name)}`, { method: 'DELETE', query: { force: true }, accept: [404] });
  }

  private oneNetworkChange<T>(change: () => Promise<T>): Promise<T> {
    const done = this.networkChanges.then(change, change);
    this.networkChanges = done.catch(() => undefined);
    return done;
  }

  /** A network's bridge on this host (undefined: `none`, not a bridge, or not found). */
  private async bridgeOf(network: string): Promise<AgentBridge | undefined> {
    if (network === 'none' || network === 'host') return undefined;
    const inspect = await this.client.jsonIfFound<{ driver?: string; network_interface?: string; subnets?: { subnet: string }[] | null }>(
      `/networks/${encodeURIComponent(network)}/json`,
    );
    if (inspect?.driver !== 'bridge' || !inspect.network_interface) return undefined;
    return { interfaceName: inspect.network_interface, subnets: (inspect.subnets ?? []).map((s) => s.subnet) };
  }

  /**
   * Installs the host's network isolation (rootful Podman: runtime/podman/network-isolation.ts) over the
   * agent network (which reaches only `gatewayPort` of the host) and the stack networks labelled `stackLabel` that exist already; stack networks created
   * from now on are covered as they are created. Answers its removal.
   */
  async isolateNetworks(isolation: NetworkIsolation, agentNetwork: string, stackLabel: string, gatewayPort: number): Promise<() => Promise<void>> {
    const agent = await this.bridgeOf(agentNetwork);
    // Engine containers would otherwise reach every service of the host (docs/egress.md).
    if (agentNetwork !== 'none' && !agent) throw new RuntimeError(`the agent network ${agentNetwork} has no bridge on this host to isolate`, false);
    const existing = await this.listNetworks(stackLabel);
    const stackBridges = await Promise.all(existing.map((network) => this.bridgeOf(network.name)));
    await isolation.install(agent, stackBridges.flatMap((bridge) => (bridge ? [bridge.interfaceName] : [])), gatewayPort);
    this.isolation = isolation;
    return async () => {
      await this.oneNetworkChange(async () => {
        this.isolation = undefined;
        await isolation.uninstall();
      });
    };
  }

  async listNetworks(label: string): Promise<NetworkSummary[]> {
    const found = await this.client.json<{ name: string; labels?: Record<string, string> | null; subnets?: { subnet: string }[] | null }[]>('/networks/json', {
      query: { filters: JSON.stringify({ label: [label] }) },
    });
    return found.map((network) => ({ name: network.name, labels: network.labels ?? {}, subnets: (network.subnets ?? []).map((s) => s.subnet) }));
  }

  async createVolume(name: string, labels: Readonly<Record<string, string>>, backingDir?: string): Promise<void> {
    const created = await this.client.json<{ Mountpoint: string }>('/volumes/create', { method: 'POST', json: { Name: name, Label: labels } });
    if (backingDir === undefined) return;
    // Bound before any container can use it (./volume-backing.ts); a volume that cannot be bound is not kept.
    await bindVolumeData(backingDir, created.Mountpoint).catch(async (error: unknown) => {
      await this.removeVolume(name).catch(() => undefined);
      throw error;
    });
  }

  async removeVolume(name: string): Promise<void> {
    const volume = await this.client.jsonIfFound<{ Mountpoint: string }>(`/volumes/${encodeURIComponent(name)}/json`);
    if (volume === undefined) return;
    await unbindVolumeData(volume.Mountpoint);
    await this.client.call(`/volumes/${encodeURIComponent(name)}`, { method: 'DELETE', query: { force: true }, accept: [404] });
  }

  async listVolumes(label: string): Promise<LabelledObject[]> {
    const found = await this.client.json<{ Name: string; Labels?: Record<string, string> | null }[]>('/volumes/json', {
      query: { filters: JSON.stringify({ label: [label] }) },
    });
    return found.map((volume) => ({ name: volume.Name, labels: volume.Labels ?? {} }));
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof PodmanApiError && error.statusCode === 404;
}
