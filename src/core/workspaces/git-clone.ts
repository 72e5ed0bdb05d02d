// POST /workspaces {"git": …}: the clone runs in a container of its own (container policy row
// `workspace-clone`: no capabilities, no new privileges, Berth's user namespace, a read-only root file
// system, the runs' network), as the user that owns a workspace's files, writing only the new workspace's
// tree. It reaches only its URL's host, through Berth's egress proxy with a credential of its own, revoked
// when it ends (git-egress.ts). Berth itself never runs git on the host and never reads the credential: the named Podman secret is
// mounted as a file that only git's credential helper reads (git-command.ts). The container counts in its
// caller's container slots, is killed at the clone timeout or at Berth's stop, and is always removed.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, errors } from '../../errors.js';
import { INSTANCE_LABEL, type Containers, type ContainerSpec, type Secrets, type UserNamespace } from '../../runtime/container-runtime.js';
import type { ContainerSlots } from '../containers/container-slots.js';
import type { SecretsPolicy } from '../validation/secrets-env.js';
import { treeUsage } from './workspace-files.js';
import type { OpenWorkspace } from './open-workspace.js';
import { CLONE_ENV, CLONE_TREE, CREDENTIAL_FILE, cloneCommand, failureLine } from './git-command.js';
import { checkGitRequest, type GitRequest, type GitSource } from './git-source.js';
import { cloneEgressPolicy } from './git-egress.js';
import type { EgressPolicy, HostPattern } from '../../egress-policy.js';
import type { RunGrants } from '../gateway/run-grants.js';
import { gatewayEnvironment } from '../../engine/command.js';

/** On a clone's container: the workspace it clones into (the instance label makes it a leftover after a crash). */
export const WORKSPACE_CLONE_LABEL = 'berth.workspace-clone';

/** What POST /workspaces hands a git request to (http/routes/workspaces.ts). */
export interface WorkspaceCloner {
  /** Every check that needs no workspace (400s, the secret's existence): called before the workspace is made. */
  check(git: GitRequest): Promise<GitSource>;
  /** Clones into the empty tree of a workspace being created; on failure the caller removes the workspace. */
  clone(owner: string, ws: OpenWorkspace, git: GitRequest): Promise<void>;
}

export interface GitClonerSettings {
  /** The default agent image (it has git). */
  readonly image: string;
  readonly instanceId: string;
  readonly network: string;
  readonly userNamespace: UserNamespace;
  /** The container uid and gid git runs as: the owner of every file Berth writes into a workspace. */
  readonly fileOwnerUid: number;
  readonly timeoutMs: number;
  readonly memoryBytes: number;
  readonly cpus: number;
  readonly pidsLimit: number;
  readonly secrets: SecretsPolicy;
  /** SERVICE_EGRESS_ALLOWED_HOSTS: a clone's host must be among them (undefined: any public host). */
  readonly allowedHosts: readonly HostPattern[] | undefined;
}

export interface GitClonerDependencies {
  readonly runtime: Containers & Pick<Secrets, 'secretExists'>;
  readonly slots: ContainerSlots;
  readonly settings: GitClonerSettings;
  /** The host path (as Podman sees it) of the workspace's tree on its disk mount: what the container gets. */
  readonly treeHostPath: (ws: OpenWorkspace) => string;
  /** Takes the workspace's `upload` checkpoint (WorkspaceService.checkpointUpload). */
  readonly checkpointUpload: (ws: OpenWorkspace) => Promise<void>;
  /** Berth's egress proxy as containers reach it, and the credentials it admits. */
  readonly gateway: { readonly url: string; readonly grants: Pick<RunGrants, 'issue' | 'bind' | 'revoke'> };
  readonly log: Logger;
}

/** A checked clone request and the one host its container may reach. */
interface CloneSource extends GitSource {
  readonly egress: EgressPolicy;
}

type Ending = { readonly kind: 'exited'; readonly exitCode: number; readonly oomKilled: boolean | undefined } | { readonly kind: 'timeout' } | { readonly kind: 'stopped' };

export class GitCloner implements WorkspaceCloner {
  private readonly stopping = new AbortController();
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(private readonly deps: GitClonerDependencies) {}

  async check(git: GitRequest): Promise<CloneSource> {
    const checked = checkGitRequest(git, this.deps.settings.secrets);
    const source = { ...checked, egress: cloneEgressPolicy(checked.url, this.deps.settings.allowedHosts) };
    if (source.secret !== undefined && !(await this.deps.runtime.secretExists(source.secret))) throw errors.gitSecretNotFound(source.secret);
    return source;
  }

  async clone(owner: string, ws: OpenWorkspace, git: GitRequest): Promise<void> {
    if (this.stopping.signal.aborted) throw errors.shuttingDown();
    const source = await this.check(git);
    const slot = await this.deps.slots.acquire(owner);
    const started = Date.now();
    const work = this.runContainer(owner, ws, source);
    this.inFlight.add(work);
    let ending: Ending;
    let output: string;
    try {
      ({ ending, output } = await work);
    } finally {
      this.inFlight.delete(work);
      slot.release();
    }
    const log = { workspace: ws.id, durationMs: Date.now() - started };
    if (ending.kind !== 'exited' || ending.exitCode !== 0) {
      const error = failure(ending, output, this.deps.settings.timeoutMs);
      this.deps.log.info({ ...log, reason: error.message }, 'git clone into a workspace failed');
      throw error;
    }
    // The file system bounds the count at three times maxFiles (room for the checkpoints): the clone itself gets maxFiles, like an archive.
    const { files } = await treeUsage(ws.tree);
    if (files > ws.maxFiles) throw errors.workspaceFull(ws.id, `the clone has ${files} files, directories and links (.git included), more than ${ws.maxFiles}`);
    await this.deps.checkpointUpload(ws);
    this.deps.log.info({ ...log, files }, 'cloned a git repository into a workspace');
  }

  /** Kills the clones in progress (they fail with 503) and waits until their containers are removed. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.inFlight]);
  }

  /** Creates, starts and waits for the clone's container; removes it whatever happens. */
  private async runContainer(owner: string, ws: OpenWorkspace, source: CloneSource): Promise<{ ending: Ending; output: string }> {
    const { runtime, gateway } = this.deps;
    const name = `berth-clone-${randomUUID()}`;
    // Keyed by the container's name: the periodic sweep revokes it should the container vanish unseen.
    const token = gateway.grants.issue(name);
    gateway.grants.bind(name, { kind: 'workspace-clone', runId: name, caller: owner, policy: source.egress });
    const spec = this.containerSpec(name, ws, source, gatewayEnvironment(gateway.url, token));
    let id: string | undefined;
    try {
      id = await runtime.createContainer(spec);
      await runtime.startContainer(id);
      const ending = await this.waitOrKill(id);
      // The log holds git's stderr, already redacted inside the container.
      const output = await runtime.logTail(id, 20, { maxBytes: 64 * 1024 }).catch(() => '');
      return { ending, output };
    } finally {
      // By name when its creation failed (Podman may have made it half-way).
      gateway.grants.revoke(name);
      await runtime.removeContainer(id ?? spec.name).catch((error: unknown) => this.deps.log.error({ err: error, container: spec.name }, 'could not remove a git clone container'));
    }
  }

  private async waitOrKill(id: string): Promise<Ending> {
    const { runtime, settings } = this.deps;
    const exited = runtime.waitContainer(id).then((exit): Ending => ({ kind: 'exited', exitCode: exit.exitCode, oomKilled: exit.oomKilled }));
    let timer: NodeJS.Timeout | undefined;
    let onStop: (() => void) | undefined;
    const cut = new Promise<Ending>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'timeout' }), settings.timeoutMs);
      onStop = () => resolve({ kind: 'stopped' });
      if (this.stopping.signal.aborted) onStop();
      else this.stopping.signal.addEventListener('abort', onStop, { once: true });
    });
    try {
      const ending = await Promise.race([exited, cut]);
      if (ending.kind !== 'exited') {
        await runtime.killContainer(id);
        await exited.catch(() => undefined);
      }
      return ending;
    } finally {
      clearTimeout(timer);
      if (onStop) this.stopping.signal.removeEventListener('abort', onStop);
    }
  }

  private containerSpec(name: string, ws: OpenWorkspace, source: GitSource, gatewayEnv: Readonly<Record<string, string>>): ContainerSpec {
    const { settings } = this.deps;
    const uid = settings.fileOwnerUid;
    // The proxy's variables only: a clone has no use for the model's credential.
    const { ANTHROPIC_API_KEY: _modelKey, ...proxyEnv } = gatewayEnv;
    return {
      kind: 'workspace-clone',
      name,
      image: settings.image,
      command: cloneCommand(source),
      env: { ...proxyEnv, ...CLONE_ENV },
      workdir: '/',
      createWorkdir: false,
      user: `${uid}:${uid}`,
      bindMounts: [{ hostPath: this.deps.treeHostPath(ws), containerPath: CLONE_TREE, readOnly: false, options: [] }],
      secretFiles: source.secret === undefined ? [] : [{ secret: source.secret, containerPath: CREDENTIAL_FILE }],
      labels: { [INSTANCE_LABEL]: settings.instanceId, [WORKSPACE_CLONE_LABEL]: ws.id },
      memoryBytes: settings.memoryBytes,
      cpus: settings.cpus,
      cpuShares: 1024,
      pidsLimit: settings.pidsLimit,
      network: settings.network,
      userNamespace: settings.userNamespace,
      // It writes only the tree: not the image's files, not Podman's tmpfs.
      readOnlyRootfs: true,
    };
  }
}

function failure(ending: Ending, output: string, timeoutMs: number): BerthError {
  if (ending.kind === 'stopped') return errors.shuttingDown();
  if (ending.kind === 'timeout') {
    return errors.workspaceCloneFailed(`it did not finish within ${Math.round(timeoutMs / 1000)} s (SERVICE_WORKSPACE_CLONE_TIMEOUT)`);
  }
  if (ending.oomKilled === true) return errors.workspaceCloneFailed('it ran out of memory');
  return errors.workspaceCloneFailed(failureLine(output));
}
