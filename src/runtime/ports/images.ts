// The images concern of the runtime: inspect, list, pull, search and remove local images, look into an
// image's files (a probe, or its whole tree mounted on the host).

import { RuntimeError } from './runtime-error.js';

export interface ImageInfo {
  readonly id: string;
  readonly user: string;
  /** The PATH its containers get. */
  readonly path?: string;
  readonly repoTags: readonly string[];
  readonly size: number;
  readonly labels?: Readonly<Record<string, string>>;
}

/** One local image as listed: every repository:tag it carries (none for a dangling image). */
export interface ImageSummary {
  readonly id: string;
  readonly repoTags: readonly string[];
  readonly size: number;
  readonly labels: Readonly<Record<string, string>>;
}

/** An image's files, mounted on the host until release(); `path` is the host path to bind-mount. */
export interface MountedImageTree {
  readonly path: string;
  release(): Promise<void>;
}

export interface PullOptions {
  /** Verify the registry's TLS certificate (false for an insecure registry on plain HTTP). */
  readonly tlsVerify: boolean;
  readonly quiet: boolean;
  readonly platform?: { readonly os: string; readonly arch: string; readonly variant?: string };
  /** Each progress line of the pull, with the blobs counted so far. */
  readonly onProgress?: (progress: PullProgress) => void;
  /** Stops the pull: the request to the runtime is closed, which ends the pull there too. */
  readonly signal?: AbortSignal;
}

/** One step of a pull. The runtime reports when a blob's copy starts, not when it ends. */
export interface PullProgress {
  /** The runtime's own words, e.g. "Copying blob sha256:…". */
  readonly message: string;
  /** Blobs (layers) whose copy has started so far. */
  readonly blobsStarted: number;
  /** Blobs copied: known only once the pull has gone past the layers (then equal to blobsStarted). */
  readonly blobsDone?: number;
}

export interface PulledImage {
  readonly id: string;
}

export interface RegistrySearchResult {
  readonly name: string;
  readonly description: string;
  readonly stars: number;
  readonly official: boolean;
}

/** A registry refused or failed a pull or a search; `notFound` when it answered that the image does not exist. */
export class RegistryError extends RuntimeError {
  constructor(
    message: string,
    readonly notFound: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, false, options);
    this.name = 'RegistryError';
  }
}

export interface Images {
  inspectImage(reference: string): Promise<ImageInfo | undefined>;
  /** Which of the paths exist in the image's filesystem: one probe container, one HEAD per path. */
  existingImagePaths(reference: string, paths: readonly string[]): Promise<Set<string>>;
  listImages(): Promise<ImageSummary[]>;
  /** Pulls from the registry the reference names; throws RegistryError when the registry fails it. */
  pullImage(reference: string, options: PullOptions): Promise<PulledImage>;
  /** Searches registries for the term (`host:port/term` searches that registry only). */
  searchImages(term: string, options: { readonly limit: number; readonly tlsVerify: boolean }): Promise<RegistrySearchResult[]>;
  /**
   * Mounts the image's files on the host and keeps them mounted until release(), through a container
   * that is created with these labels and never started.
   */
  mountImageTree(image: string, holder: { readonly name: string; readonly labels: Readonly<Record<string, string>> }): Promise<MountedImageTree>;
  /** Removes an image; false when it is still used by a container (it is then kept). */
  removeImage(reference: string): Promise<boolean>;
}
