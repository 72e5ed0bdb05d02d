// The container an engine runs in, for a one-shot run or a persistent agent alike: the plan's image,
// limits and volumes, the session directory as the engine's config directory, the engine image's files
// (held mounted by Berth) read-only at /opt/claude, the caller's secrets as files, Berth's labels, and the input files
// to upload, among them the run's own credential for the model gateway and egress proxy (never the model's key).
import type { RunPlan } from '../run-plan.js';
import type { PreparedSession } from '../sessions/session-store.js';
import { HOST_FROM_CONTAINER, type EngineAccess } from '../engine-access.js';
import type { RunGrants } from '../gateway/run-grants.js';
import type { GrantHolder } from '../gateway/gateway-types.js';
import type { BindMount, ContainerSpec, NetworkAttachment, UserNamespace, VolumeMountSpec } from '../../runtime/ports/container-specs.js';
import { INSTANCE_LABEL, RUN_LABEL } from '../../runtime/ports/labels.js';
import { buildEngineInvocation, gatewayEnvFile, gatewayEnvironment } from '../../engine/command.js';
import { ENGINE_CONFIG_DIR, ENGINE_HOME, ENGINE_MOUNT, GATEWAY_ENV_FILE_NAME, INPUT_DIR, SECRET_ENV_DIR } from '../../engine/layout.js';
import type { InputFileContent, RunInputs } from './run-inputs.js';

/** What every engine container shares, from configuration. */
export interface EngineContainerSettings {
  readonly engineAccess: EngineAccess;
  /**
   * Berth's model gateway and egress proxy as containers reach it (`http://<agent network gateway>:<port>`),
   * and the per-run credentials it accepts.
   */
  readonly gateway: { readonly url: string; readonly grants: RunGrants };
  /**
   * Host path of the engine image's files, held mounted by Berth and bind-mounted read-only at ENGINE_MOUNT;
   * undefined when the engine comes with the agent image (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false).
   */
  readonly engineTree: string | undefined;
  readonly instanceId: string;
  readonly pidsLimit: number;
  readonly network: string;
  /**
   * The agent network's gateway: with a compose stack's network joined too, Podman may point
   * host.containers.internal (where the gateway listens when Podman is rootless) at the stack network's
   * gateway; the engine container gets this one instead.
   */
  readonly agentNetworkGateway?: string;
  readonly userNamespace: UserNamespace;
  readonly workdirAutoCreate: boolean;
  readonly inputs: RunInputs;
}

/** What the engine container joins of its session's compose stack (core/compose/stacks.ts StackAttachment). */
export interface JoinedStack {
  /** The stack's network, where the engine answers to the agent service's name. */
  readonly network: NetworkAttachment;
  readonly volumeMounts: readonly VolumeMountSpec[];
  /** The agent service's environment (the engine's own variables win). */
  readonly environment: Readonly<Record<string, string>>;
  /** The services' names and addresses, for the engine's /etc/hosts (the stack's network has no DNS). */
  readonly hostEntries: NonNullable<ContainerSpec['hostEntries']>;
}

export interface EngineContainer {
  readonly spec: ContainerSpec;
  /** To write with RunInputs.write(id, …) before the container is created (it is mounted at INPUT_DIR). */
  readonly inputFiles: readonly InputFileContent[];
}

export function engineContainer(
  settings: EngineContainerSettings,
  options: {
    readonly id: string;
    readonly plan: RunPlan;
    readonly session: PreparedSession;
    /** Where each of the plan's volumes is mounted from: its staging mount (runtime/volume-staging.ts). */
    readonly volumeSources: readonly string[];
    /** The engine executable in the container (core/runs/image-check.ts engineBinary). */
    readonly engineBinary: string;
    readonly interactive?: boolean;
    /** A pre-started engine of the pool: stdin open for its one prompt (engine/command.ts `pooled`). */
    readonly pooled?: boolean;
    /** The session's compose stack, when the run has an environment: its network, volumes and environment. */
    readonly stack?: JoinedStack;
    /**
     * Whose the container's credential is, when known now (a run's, an agent's); a pooled engine's is bound
     * at its claim (EnginePool.claim), and refused until then.
     */
    readonly holder?: GrantHolder;
  },
): EngineContainer {
  const { plan, session, volumeSources } = options;
  if (volumeSources.length !== plan.container.volumes.length) throw new Error('every volume needs its staged source');
  const pooled = options.pooled === true;
  const interactive = options.interactive === true || pooled;
  const access = settings.engineAccess.current();
  const invocation = buildEngineInvocation({
    engine: plan.engine,
    session: session.engineSession,
    // A persistent agent gets its turns on stdin; its plan's prompt is only the first turn.
    prompt: interactive ? '' : plan.prompt,
    modelBaseUrl: settings.gateway.url,
    offlineModel: access.offline,
    lifecycle: plan.container.lifecycle,
    engineBinary: options.engineBinary,
    interactive: options.interactive === true,
    pooled,
  });
  const spec: ContainerSpec = {
    kind: pooled ? 'pooled-engine' : options.interactive === true ? 'agent' : 'run',
    name: `berth-${options.id}`,
    image: plan.container.image,
    command: invocation.command,
    // The agent service's variables first: the engine's own (credential, configuration) cannot be overridden.
    env: { ...options.stack?.environment, ...invocation.env, ...(session.writable ? { HOME: ENGINE_HOME } : {}) },
    workdir: plan.workdir,
    createWorkdir: settings.workdirAutoCreate,
    bindMounts: [
      { hostPath: session.mountPath, containerPath: ENGINE_CONFIG_DIR, readOnly: false, options: [] },
      { hostPath: settings.inputs.hostPathOf(options.id), containerPath: INPUT_DIR, readOnly: true, options: [] },
      ...(settings.engineTree !== undefined ? [{ hostPath: settings.engineTree, containerPath: ENGINE_MOUNT, readOnly: true, options: [] }] : []),
      ...plan.container.volumes.map((v, index) => ({ hostPath: volumeSources[index]!, containerPath: v.containerPath, readOnly: v.readOnly, options: v.options })),
      ...diskMounts(session, plan, options.stack?.volumeMounts.map((mount) => mount.containerPath) ?? []),
    ],
    secretFiles: [
      ...plan.container.secretsEnv.map((s) => ({ secret: s.secret, containerPath: `${SECRET_ENV_DIR}/${s.variable}` })),
    ],
    labels: { [RUN_LABEL]: options.id, [INSTANCE_LABEL]: settings.instanceId },
    memoryBytes: plan.container.memoryBytes,
    cpus: plan.container.cpus,
    cpuShares: plan.container.cpuShares,
    pidsLimit: settings.pidsLimit,
    network: settings.network,
    userNamespace: settings.userNamespace,
    ...(session.writable ? { readOnlyRootfs: true } : {}),
    ...(interactive ? { interactive: true } : {}),
    ...(options.stack
      ? {
          stackNetwork: options.stack.network,
          volumeMounts: options.stack.volumeMounts,
          // The stack's services by name (its network has no DNS), and the host as the agent network's gateway.
          hostEntries: [
            ...options.stack.hostEntries,
            ...(settings.agentNetworkGateway !== undefined ? [{ host: HOST_FROM_CONTAINER, address: settings.agentNetworkGateway }] : []),
          ],
        }
      : {}),
  };
  // Issued last, once nothing above can throw: a grant is only made for a container about to exist.
  const token = settings.gateway.grants.issue(options.id);
  if (options.holder) settings.gateway.grants.bind(options.id, options.holder);
  const inputFiles = [
    ...Object.entries(invocation.inputFiles).map(([name, content]) => ({ name, content })),
    { name: GATEWAY_ENV_FILE_NAME, content: gatewayEnvFile(gatewayEnvironment(settings.gateway.url, token)) },
  ];
  return { spec, inputFiles };
}

/**
 * With a disk limit (container.disk) the image's root file system is read-only and the places a run writes
 * are directories of its own file system: /tmp, /var/tmp, HOME (ENGINE_HOME) and the workdir, unless a
 * volume (the caller's, or the stack's) already provides the workdir. The engine's config dir is the disk's root.
 */
function diskMounts(session: PreparedSession, plan: RunPlan, stackPaths: readonly string[]): BindMount[] {
  const writable = session.writable;
  if (!writable) return [];
  const mount = (hostPath: string, containerPath: string): BindMount => ({ hostPath, containerPath, readOnly: false, options: [] });
  const mounts = [mount(writable.tmp, '/tmp'), mount(writable['var-tmp'], '/var/tmp'), mount(writable.home, ENGINE_HOME)];
  const covering = [...mounts.map((m) => m.containerPath), ...plan.container.volumes.map((v) => v.containerPath), ...stackPaths];
  const workdirCovered = covering.some((path) => plan.workdir === path || plan.workdir.startsWith(`${path}/`));
  // The workdir receives the run's workspace, bound on the host below it, also once the container runs (a
  // pooled engine's: run-workspace.ts); the run disk is a shared mount for that (runtime/run-disk.ts).
  return workdirCovered ? mounts : [...mounts, { ...mount(writable.workdir, plan.workdir), receivesHostMounts: true }];
}
