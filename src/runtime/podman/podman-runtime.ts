// ContainerRuntime over Podman's libpod REST API.
import { randomBytes } from 'node:crypto';
import type {
  ContainerExit,
  ContainerRuntime,
  ContainerSpec,
  ContainerSummary,
  ImageInfo,
  InputFile,
  OutputChunk,
} from '../container-runtime.js';
import { PROBE_LABEL } from '../container-runtime.js';
import { tarFiles } from '../tar.js';
import { PodmanApiError, PodmanClient } from './client.js';
import { toSpecGenerator } from './container-spec.js';
import { demultiplex } from './multiplexed-stream.js';

interface LibpodInspect {
  State: { ExitCode: number; OOMKilled: boolean; Status: string };
}

interface LibpodImage {
  Id: string;
  RepoTags?: string[] | null;
  Size?: number;
  Config?: { User?: string };
}

interface LibpodContainer {
  Id: string;
  Names?: string[];
  Labels?: Record<string, string> | null;
}

interface LibpodSecret {
  Spec: { Name: string };
}

export class PodmanRuntime implements ContainerRuntime {
  constructor(private readonly client: PodmanClient) {}

  async ping(): Promise<void> {
    await this.client.call('/_ping');
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    const created = await this.client.json<{ Id: string }>('/containers/create', {
      method: 'POST',
      json: toSpecGenerator(spec),
    });
    return created.Id;
  }

  async putFiles(id: string, directory: string, files: readonly InputFile[]): Promise<void> {
    await this.client.call(`/containers/${id}/archive`, {
      method: 'PUT',
      query: { path: directory },
      body: tarFiles(files),
      contentType: 'application/x-tar',
    });
  }

  async startContainer(id: string): Promise<void> {
    await this.client.call(`/containers/${id}/start`, { method: 'POST', accept: [304] });
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

  async waitContainer(id: string): Promise<ContainerExit> {
    await this.client.call(`/containers/${id}/wait`, { method: 'POST', query: { condition: 'exited' } });
    const inspect = await this.client.json<LibpodInspect>(`/containers/${id}/json`);
    return { exitCode: inspect.State.ExitCode, oomKilled: inspect.State.OOMKilled };
  }

  async killContainer(id: string, signal = 'SIGKILL'): Promise<void> {
    // 404: already gone; 409: not running any more. Both mean there is nothing left to kill.
    await this.client.call(`/containers/${id}/kill`, { method: 'POST', query: { signal }, accept: [404, 409] });
  }

  async removeContainer(id: string): Promise<void> {
    await this.client.call(`/containers/${id}`, {
      method: 'DELETE',
      query: { force: true, v: true, timeout: 0 },
      accept: [404],
    });
  }

  async listContainers(label: string): Promise<ContainerSummary[]> {
    const containers = await this.client.json<LibpodContainer[]>('/containers/json', {
      query: { all: true, filters: JSON.stringify({ label: [label] }) },
    });
    return containers.map((c) => ({ id: c.Id, names: c.Names ?? [], labels: c.Labels ?? {} }));
  }

  async inspectImage(reference: string): Promise<ImageInfo | undefined> {
    const response = await this.client.request(`/images/${encodeURIComponent(reference)}/json`, { accept: [404] });
    if (response.statusCode === 404) {
      await response.body.dump();
      return undefined;
    }
    const image = (await response.body.json()) as LibpodImage;
    return { id: image.Id, user: image.Config?.User ?? '', repoTags: image.RepoTags ?? [], size: image.Size ?? 0 };
  }

  async imageHasAnyPath(reference: string, paths: readonly string[]): Promise<boolean> {
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
      for (const path of paths) {
        const status = await this.client.call(`/containers/${probe.Id}/archive`, {
          method: 'HEAD',
          query: { path },
          accept: [404],
        });
        if (status === 200) return true;
      }
      return false;
    } finally {
      await this.removeContainer(probe.Id);
    }
  }

  async secretExists(name: string): Promise<boolean> {
    const response = await this.client.request(`/secrets/${encodeURIComponent(name)}/json`, { accept: [404] });
    await response.body.dump();
    return response.statusCode === 200;
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

  async removeSecret(name: string): Promise<void> {
    await this.client.call(`/secrets/${encodeURIComponent(name)}`, { method: 'DELETE', accept: [404] });
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof PodmanApiError && error.statusCode === 404;
}
