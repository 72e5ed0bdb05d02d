// Images over Podman's libpod REST API: local images inspected, listed and removed, pulls and searches of
// registries (their failures as RegistryError), and looks into an image's files through containers that
// are created and never started.
import { randomBytes } from 'node:crypto';
import type { Images, ImageInfo, ImageSummary, MountedImageTree, PulledImage, PullOptions, RegistrySearchResult } from '../ports/images.js';
import { RegistryError } from '../ports/images.js';
import { PROBE_LABEL } from '../ports/labels.js';
import { PodmanApiError, type PodmanClient } from './client.js';
import { removeContainer } from './container-removal.js';
import { isRegistryNotFound, readPullStream } from './pull-stream.js';

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

/** What a container gets as PATH when its image sets none (Podman's default). */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Podman's answer about a registry as a RegistryError; an unreachable Podman stays what it is. */
function registryError(error: unknown): unknown {
  if (!(error instanceof PodmanApiError) || error.statusCode === 0) return error;
  return new RegistryError(error.message, error.statusCode === 404 || isRegistryNotFound(error.message), { cause: error });
}

export class PodmanImages implements Images {
  readonly #client: PodmanClient;

  constructor(client: PodmanClient) {
    this.#client = client;
  }

  async inspectImage(reference: string): Promise<ImageInfo | undefined> {
    const image = await this.#client.jsonIfFound<LibpodImage>(`/images/${encodeURIComponent(reference)}/json`);
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

  async listImages(): Promise<ImageSummary[]> {
    const images = await this.#client.json<LibpodImageSummary[]>('/images/json');
    return images.map((i) => ({ id: i.Id, repoTags: i.RepoTags ?? [], size: i.Size ?? 0, labels: i.Labels ?? {} }));
  }

  async removeImage(reference: string): Promise<boolean> {
    const status = await this.#client.call(`/images/${encodeURIComponent(reference)}`, { method: 'DELETE', accept: [404, 409] });
    return status !== 409;
  }

  async pullImage(reference: string, options: PullOptions): Promise<PulledImage> {
    let response;
    try {
      response = await this.#client.request('/images/pull', {
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
      throw registryError(error);
    }
  }

  async searchImages(term: string, options: { readonly limit: number; readonly tlsVerify: boolean }): Promise<RegistrySearchResult[]> {
    let results: LibpodSearchResult[];
    try {
      results = await this.#client.json<LibpodSearchResult[]>('/images/search', {
        query: { term, limit: options.limit, tlsVerify: options.tlsVerify },
      });
    } catch (error) {
      throw registryError(error);
    }
    return results.map((r) => ({
      name: r.Name,
      description: r.Description ?? '',
      stars: r.Stars ?? 0,
      official: r.Official === '[OK]',
    }));
  }

  // Podman 4.3 shares one mount of an image among the containers that mount it (`type=image`) and
  // sometimes unmounts it while another container of the same image is being removed, so a concurrent
  // start fails with `lowerdir=…/merged: no such file or directory`. A container of the image's own,
  // created and never started, mounted once and held, gives a tree whose mount nobody else counts.
  async mountImageTree(image: string, holder: { readonly name: string; readonly labels: Readonly<Record<string, string>> }): Promise<MountedImageTree> {
    await removeContainer(this.#client, holder.name);
    const created = await this.#client.json<{ Id: string }>('/containers/create', {
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
      const response = await this.#client.request(`/containers/${created.Id}/mount`, { method: 'POST' });
      const text = (await response.body.text()).trim();
      const mounted = text.startsWith('"') ? (JSON.parse(text) as string) : text;
      if (!mounted.startsWith('/')) throw new Error(`Podman answered the mount of ${image} with ${JSON.stringify(text.slice(0, 200))}`);
      return { path: mounted, release: () => removeContainer(this.#client, created.Id) };
    } catch (error) {
      await removeContainer(this.#client, created.Id).catch(() => undefined);
      throw error;
    }
  }

  async existingImagePaths(reference: string, paths: readonly string[]): Promise<Set<string>> {
    return this.#withProbe(reference, async (probe) => {
      const found = await Promise.all(paths.map(async (path) => ((await this.#probeHasPath(probe, path)) ? [path] : [])));
      return new Set(found.flat());
    });
  }

  async #probeHasPath(probeId: string, path: string): Promise<boolean> {
    const status = await this.#client.call(`/containers/${probeId}/archive`, { method: 'HEAD', query: { path }, accept: [404] });
    return status === 200;
  }

  async #withProbe<T>(reference: string, use: (probeId: string) => Promise<T>): Promise<T> {
    // The archive endpoint needs a container; a created (never started) one costs a few ms and no process.
    const probe = await this.#client.json<{ Id: string }>('/containers/create', {
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
      await removeContainer(this.#client, probe.Id);
    }
  }
}
