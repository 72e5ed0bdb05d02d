// A run request after validation: every value checked, parsed and defaulted. Past the validator nothing
// needs to be re-checked; the runtime and the engine command line are built from this alone.
import type { EngineOptions } from './run-request.js';
import type { LifecycleHooks } from '../engine/engine-flags.js';
import type { ContainerOptions } from './run-request.js';
import type { StackDefinition } from './compose-file/stack-definition.js';
import type { EgressPolicy } from '../egress-policy.js';

export type ComposeEnvironmentRequest = NonNullable<ContainerOptions['environment']>;

/** A checked compose environment: the stack the run's session gets (core/compose). */
export interface EnvironmentPlan {
  /** The compose file, resolved. */
  readonly composePath: string;
  /** The service the engine runs in. */
  readonly service: string;
  readonly buildTimeoutMs: number;
  readonly healthTimeoutMs: number;
  readonly definition: StackDefinition;
}

/** What the run does with sessions; exactly one of these, so contradictory flags cannot reach the runtime. */
export type SessionIntent =
  | { readonly kind: 'new' }
  | { readonly kind: 'resume'; readonly sessionId: string }
  | { readonly kind: 'fork'; readonly fromSessionId: string }
  | { readonly kind: 'continue' }
  | { readonly kind: 'ephemeral' };

/**
 * Which workspace the run works in (core/runs/run-workspace.ts resolves it once the session is taken):
 * `given`: the caller's workspace named by the request; `session`: the session's own (a new session gets
 * one made, a resumed one keeps what it has, a fork gets a copy of its parent's); `none`: a run without
 * persistence and without a named workspace.
 */
export type WorkspaceIntent =
  | { readonly kind: 'given'; readonly id: string }
  | { readonly kind: 'session' }
  | { readonly kind: 'none' };

/**
 * The mount options a request may carry (core/validation/volumes.ts ALLOWED_MOUNT_OPTIONS says why).
 * `exec`, `suid`, `dev` and propagation options are deliberately not representable.
 */
export type MountOption = 'ro' | 'rw' | 'z' | 'Z' | 'noexec' | 'nosuid' | 'nodev';

export interface VolumeMount {
  /** Host path after symlink resolution (what is actually mounted). */
  readonly hostPath: string;
  readonly containerPath: string;
  readonly readOnly: boolean;
  /** Mount options passed to the runtime, without ro/rw (see readOnly). */
  readonly options: readonly MountOption[];
}

export interface SecretEnv {
  readonly variable: string;
  readonly secret: string;
}

export interface ContainerPlan {
  readonly image: string;
  readonly volumes: readonly VolumeMount[];
  readonly secretsEnv: readonly SecretEnv[];
  readonly memoryBytes: number;
  /** The memory limit as the caller wrote it (or the default), for messages. */
  readonly memoryText: string;
  /** Size of the run's own file system, which holds everything it can write (runtime/run-disk.ts). */
  readonly diskBytes: number;
  readonly diskText: string;
  readonly cpus: number;
  readonly cpuShares: number;
  readonly timeoutMs: number;
  readonly timeoutText: string;
  /** Lifecycle hooks, present when the request had container.lifecycle; each entry is one shell command. */
  readonly lifecycle?: LifecyclePlan;
  /** The compose stack the engine runs in, when the request had container.environment. */
  readonly environment?: EnvironmentPlan;
  /** What the run may reach through the egress proxy (container.network; docs/egress.md). */
  readonly network: EgressPolicy;
}

/** Lifecycle hooks as the engine's launch script runs them. */
export type LifecyclePlan = LifecycleHooks;

/** Engine options after validation; session flags are folded into RunPlan.session. */
export type EnginePlan = Omit<EngineOptions, 'session_id' | 'resume' | 'continue' | 'fork_session' | 'no_persistence' | 'json_schema'> & {
  /** Always the schema object, whichever form the request gave it in. */
  readonly json_schema?: Record<string, unknown>;
};

export interface RunPlan {
  readonly prompt: string;
  readonly workdir: string;
  readonly session: SessionIntent;
  readonly workspace: WorkspaceIntent;
  readonly engine: EnginePlan;
  readonly container: ContainerPlan;
  readonly webhookUrl: string | undefined;
}
