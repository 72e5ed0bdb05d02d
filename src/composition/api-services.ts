// The services only the API uses, built over the domain's: the health and version it reports, the views of
// sessions, images and usage, git clones into new workspaces, and the limits of its event streams. With
// the domain's own services they are everything the routes call (http/routes/index.ts RouteServices).
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AgentService } from '../core/agents/agent-service.js';
import type { AuthService } from '../core/auth/auth-service.js';
import type { EngineAccess } from '../core/engine-access.js';
import type { RunGrants } from '../core/gateway/run-grants.js';
import { UsageReport } from '../core/gateway/usage-report.js';
import { ImageCatalog } from '../core/images/image-catalog.js';
import type { JobService } from '../core/jobs/job-service.js';
import type { RunService } from '../core/runs/run-service.js';
import { SessionService } from '../core/sessions/session-service.js';
import type { SessionStore } from '../core/sessions/session-store.js';
import { SystemStatus } from '../core/system-status.js';
import { secretsPolicy } from '../core/validation/secrets-env.js';
import { GitCloner } from '../core/workspaces/git-clone.js';
import type { WorkspaceService } from '../core/workspaces/workspace-service.js';
import { CONSOLE_DIST } from '../http/app.js';
import type { RouteServices } from '../http/routes/index.js';
import { StreamLimit, type SseOptions } from '../http/sse.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import { TREE_DIR, VIEW_SUFFIX, type WorkspaceDisks } from '../runtime/workspace-disks.js';
import type { UsageStore } from '../store/usage/usage-store.js';
import { checkoutCommit, versionInfo } from '../version.js';
import type { EngineContainers } from './engine-containers.js';
import type { Teardown } from './teardown.js';

export interface ApiServiceInputs {
  readonly config: Config;
  readonly runtime: ContainerRuntime;
  readonly engineAccess: EngineAccess;
  readonly auth: AuthService;
  readonly runs: RunService;
  readonly jobs: JobService;
  readonly agents: AgentService;
  readonly sessions: SessionStore;
  readonly workspaces: WorkspaceService;
  /** The workspaces' file systems; undefined where workspaces are unavailable (then there are no clones). */
  readonly workspaceDisks: WorkspaceDisks | undefined;
  readonly containers: Pick<EngineContainers, 'settings' | 'slots' | 'stacks' | 'imageProbe'>;
  readonly gateway: { readonly url: string; readonly grants: RunGrants };
  readonly usage: UsageStore;
  /** This node's lease on the shared database; undefined without SERVICE_DATABASE_URL. */
  readonly nodeLease: { readonly registered: boolean } | undefined;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export async function buildApiServices(inputs: ApiServiceInputs): Promise<RouteServices> {
  const { config, runtime, containers, metrics } = inputs;
  const streams = new StreamLimit(config.sse.maxStreams);
  const sse: SseOptions = {
    heartbeatMs: config.sse.heartbeatMs,
    subscribers: metrics.sseSubscribers,
    maxBufferedBytes: config.sse.maxBufferedBytes,
    admit: () => streams.admit(),
  };
  const cloner = inputs.workspaceDisks ? gitCloner(inputs) : undefined;
  // Ended at the stop before the listener closes, so a clone in flight does not hold the stop up.
  if (cloner) inputs.teardown.endWork(() => cloner.stop());
  return {
    auth: inputs.auth,
    metrics,
    status: new SystemStatus(config, runtime, inputs.engineAccess, { name: config.cluster.nodeName, lease: inputs.nodeLease }),
    version: versionInfo({ engineImage: config.agent.engineImage, agentImage: config.agent.image }, await checkoutCommit(join(import.meta.dirname, '..', '..'))),
    runs: inputs.runs,
    jobs: inputs.jobs,
    usage: new UsageReport(inputs.usage, config.budgets),
    workspaces: inputs.workspaces,
    ...(cloner ? { cloner } : {}),
    archive: config.workspaces,
    agents: inputs.agents,
    sessions: new SessionService({
      store: inputs.sessions,
      maxPageSize: config.sessions.maxPageSize,
      teardown: async (sessionId) => {
        await containers.stacks.remove(sessionId);
        // The session's own workspace goes with it; a caller's workspace is only unlinked.
        await inputs.workspaces.removeForSession(sessionId);
      },
      stackOf: (sessionId) => containers.stacks.view(sessionId),
    }),
    images: new ImageCatalog({
      runtime,
      probe: containers.imageProbe,
      policy: {
        allowedPatterns: config.agent.allowedImagePatterns,
        defaultImage: config.agent.image,
        insecureRegistries: config.images.insecureRegistries,
      },
    }),
    sse,
    consoleDir: CONSOLE_DIST,
  };
}

/** git clones into new workspaces, each in a container of its own (core/workspaces/git-clone.ts). */
function gitCloner({ config, runtime, containers, gateway, workspaces, logger }: ApiServiceInputs): GitCloner {
  return new GitCloner({
    runtime,
    slots: containers.slots,
    settings: {
      image: config.agent.image,
      instanceId: config.instanceName,
      network: config.agent.network,
      userNamespace: containers.settings.userNamespace,
      fileOwnerUid: config.workspaces.fileOwnerUid,
      timeoutMs: config.workspaces.cloneTimeoutMs,
      memoryBytes: config.agent.defaultMemoryBytes,
      cpus: config.agent.defaultCpus,
      pidsLimit: config.agent.pidsLimit,
      secrets: secretsPolicy(config.engine),
      allowedHosts: config.egress.allowedHosts,
    },
    gateway,
    // The disk mount's tree beside its view (runtime/workspace-disks.ts), as a run's workdir gets it.
    treeHostPath: (ws) => join(ws.view.slice(0, -VIEW_SUFFIX.length), TREE_DIR),
    checkpointUpload: (ws) => workspaces.checkpointUpload(ws),
    log: logger,
  });
}
