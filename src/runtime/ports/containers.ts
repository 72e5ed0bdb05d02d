// The containers concern of the runtime: create, start, attach to, watch, stop and remove containers, and read
// their logs and health. Runs, agents, the pool, workspaces' clones and compose stacks all use it.

import type { ContainerSpec, ServiceContainerSpec } from './container-specs.js';

export type HealthStatus = 'healthy' | 'unhealthy' | 'starting';

export interface OutputChunk {
  readonly stream: 'stdout' | 'stderr';
  readonly data: Buffer;
}

export interface ContainerSummary {
  readonly id: string;
  readonly names: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
}

/** Narrows a log tail: lines logged from `sinceMs` on (epoch ms), and at most `maxBytes` of them (the first ones). */
export interface LogTailOptions {
  readonly sinceMs?: number;
  readonly maxBytes?: number;
}

/** A started-or-created container's standard streams, attached over one connection. */
export interface AttachedContainer {
  /** The container's stdin; end() closes it (the process reads EOF). */
  readonly stdin: NodeJS.WritableStream;
  /** stdout/stderr from the moment of attaching until the container exits or close() is called. */
  readonly output: AsyncIterable<OutputChunk>;
  /** Drops the connection (stdin and output) without touching the container. */
  close(): void;
}

export interface ContainerExit {
  readonly exitCode: number;
  /** Killed by the kernel's OOM killer; undefined when the host cannot tell (cgroup v1 without its kernel log). */
  readonly oomKilled: boolean | undefined;
}

/** A container found by name or id: whether it still runs, since when, and how it ended if it has. */
export interface ContainerState {
  readonly id: string;
  readonly running: boolean;
  /** Epoch milliseconds; undefined when it never started. */
  readonly startedAtMs: number | undefined;
  readonly exit: ContainerExit;
}

export interface Containers {
  createContainer(spec: ContainerSpec): Promise<string>;
  startContainer(id: string): Promise<void>;
  /** Changes a running container's CPU weight (cgroup shares), e.g. once a pre-started engine is claimed. */
  setCpuShares(id: string, shares: number): Promise<void>;
  /** Gives a container a new name (a claimed pooled engine becomes its run's); false when it is gone. */
  renameContainer(id: string, name: string): Promise<boolean>;
  /** Follows stdout/stderr through the container's log, from its start until it exits or the signal aborts. */
  followOutput(id: string, signal: AbortSignal): AsyncIterable<OutputChunk>;
  /**
   * Attaches to stdout/stderr only (call before start to miss nothing): output arrives as it is written
   * and the stream ends when the container exits, where following the log adds Podman's polling delay.
   */
  attachOutput(id: string): Promise<{ readonly output: AsyncIterable<OutputChunk>; close(): void }>;
  /** Attaches to stdin/stdout/stderr of a container created with `interactive`; call before start to miss nothing. */
  attach(id: string): Promise<AttachedContainer>;
  waitContainer(id: string): Promise<ContainerExit>;
  /** The container's state, or undefined when there is no such container. */
  inspectContainer(nameOrId: string): Promise<ContainerState | undefined>;
  killContainer(id: string, signal?: string): Promise<void>;
  /** Forced removal; succeeds when the container is already gone. */
  removeContainer(id: string): Promise<void>;
  listContainers(label: string): Promise<ContainerSummary[]>;
  createServiceContainer(spec: ServiceContainerSpec): Promise<string>;
  /** Runs the container's healthcheck once, now, and answers the status it leaves. */
  runHealthcheck(id: string): Promise<HealthStatus>;
  /** The last `lines` lines of the container's stdout and stderr. */
  logTail(id: string, lines: number, options?: LogTailOptions): Promise<string>;
  /**
   * A reader of the CPU time (seconds) the container's main process has used so far, read from the host's
   * /proc without asking Podman again; undefined when the container is not running here. The reader
   * answers undefined once the process is gone.
   */
  mainProcessCpu(id: string): Promise<(() => Promise<number | undefined>) | undefined>;
}
