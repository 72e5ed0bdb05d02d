// The builds concern of the runtime: an image built from a context directory, confined like a run
// (runtime/podman/image-build.ts), for a compose stack's `build:` services.

import { STACK_INSTANCE_LABEL } from './labels.js';
import { RuntimeError } from './runtime-error.js';
import type { UserNamespace } from './container-specs.js';

/**
 * A build confined like a run (runtime/podman/image-build.ts): its steps get no network at all (not even a
 * route to the host), a user namespace (rootful: the build runs under rootless Podman as `buildUser`),
 * no pulls (every image it reads must be local), and the context is packed by Berth (links pointing out
 * of it dropped, at most `maxContextBytes` of file data).
 */
export interface BuildOptions {
  /** Host directory sent as the build context (Berth's own staging path: nothing in it is followed). */
  readonly contextDir: string;
  /** Relative path of a regular file inside the context. */
  readonly dockerfile: string;
  readonly tag: string;
  readonly args: Readonly<Record<string, string>>;
  readonly target?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxContextBytes: number;
  readonly userNamespace: UserNamespace;
  /** The unprivileged system user whose rootless Podman runs the build (created when missing; rootful only). */
  readonly buildUser: string;
  readonly memoryBytes: number;
  readonly cpus: number;
  /** Processes and threads of the whole build at once (its Podman, runc and every step): the policy's pids limit. */
  readonly pidsLimit: number;
  /**
   * The build's sandbox (context, storage of the images it reads and makes, every step's writes, the saved
   * result) is a file system of this size (runtime/run-disk.ts); undefined: the host cannot make one.
   */
  readonly diskBytes?: number;
  /**
   * Sees the Containerfile exactly as it will be built, before Podman gets anything; rejects to refuse the
   * build, or answers the local images (normalised references) it reads.
   */
  checkContainerfile(text: string): Promise<readonly string[]>;
}

/** The temporary directories of a build are named after the instance that asked for it (its stack label). */
export function sandboxPrefix(options: Pick<BuildOptions, 'labels'>): string {
  const instance = (options.labels[STACK_INSTANCE_LABEL] ?? '').replace(/[^A-Za-z0-9_.-]/g, '');
  return `berth-build-${instance === '' ? '' : `${instance}-`}`;
}

/** A build that did not finish within its time; its running step was killed. */
export class BuildTimeoutError extends RuntimeError {
  constructor(readonly timeoutMs: number) {
    super(`the build did not finish within ${Math.round(timeoutMs / 1000)} s`, false);
    this.name = 'BuildTimeoutError';
  }
}

/** The build context cannot be sent as it is: too large, or its Containerfile is not a regular file in it. */
export class BuildContextError extends RuntimeError {
  constructor(
    message: string,
    readonly reason: 'too-large' | 'containerfile',
  ) {
    super(message, false);
    this.name = 'BuildContextError';
  }
}

export interface Builds {
  /** Builds an image from a context directory; rejects with the build's own error, or BuildTimeoutError. */
  buildImage(options: BuildOptions): Promise<string>;
}
