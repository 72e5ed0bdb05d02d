// Every route group of the API, from this one list, in the order they are registered: the order of the
// paths in the OpenAPI document (GET /swagger/doc.json, docs/api.md). buildApp registers them all; each
// group gets the services its routes call and nothing else.
import type { FastifyInstance } from 'fastify';
import type { AgentService } from '../../core/agents/agent-service.js';
import type { AuthService } from '../../core/auth/auth-service.js';
import type { UsageReport } from '../../core/gateway/usage-report.js';
import type { ImageCatalog } from '../../core/images/image-catalog.js';
import type { JobService } from '../../core/jobs/job-service.js';
import type { RunService } from '../../core/runs/run-service.js';
import type { SessionService } from '../../core/sessions/session-service.js';
import type { SystemStatus } from '../../core/system-status.js';
import type { WorkspaceService } from '../../core/workspaces/workspace-service.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { VersionInfo } from '../../version.js';
import type { SseOptions } from '../sse.js';
import type { ClusterForwarding } from '../../core/cluster/forwarding.js';
import type { Counter } from 'prom-client';
import { registerAgentRoutes } from './agents.js';
import { registerAuthRoutes } from './auth.js';
import { registerConsoleRoutes } from './console.js';
import { registerImageRoutes } from './images.js';
import { registerJobRoutes } from './jobs.js';
import { registerMcpRoutes } from './mcp.js';
import { registerRunRoutes } from './run.js';
import { registerSessionRoutes } from './sessions.js';
import { registerStreamRoutes } from './stream.js';
import { registerSystemRoutes } from './system.js';
import { registerUsageRoutes } from './usage.js';
import { registerWorkspaceArchiveRoutes, type WorkspaceArchiveSettings } from './workspace-archive.js';
import { registerWorkspaceRoutes, type WorkspaceCloner } from './workspaces.js';

/** What the routes call: the domain's services, and how the HTTP edge answers (SSE, metrics, version). */
export interface RouteServices {
  readonly auth: AuthService;
  readonly metrics: Metrics;
  readonly status: SystemStatus;
  readonly version: VersionInfo;
  readonly runs: RunService;
  readonly jobs: JobService;
  readonly usage: UsageReport;
  readonly workspaces: WorkspaceService;
  /** git clones into new workspaces; absent where workspaces are unavailable. */
  readonly cloner?: WorkspaceCloner;
  readonly archive: WorkspaceArchiveSettings;
  readonly agents: AgentService;
  readonly sessions: SessionService;
  readonly images: ImageCatalog;
  /** Heartbeats, buffers and the admission of every event stream. */
  readonly sse: SseOptions;
  /** Where the web console's build is (packages/console/dist). */
  readonly consoleDir: string;
  /**
   * With several nodes on one database (SERVICE_DATABASE_URL): where an agent or a running job is, to forward
   * requests for it (plugins/forward.ts) and list a caller's agents on every node. Absent: one node.
   */
  readonly cluster?: { readonly forwarding: ClusterForwarding; readonly forwarded: Counter<'route' | 'outcome'> };
}

export type RouteGroup = (app: FastifyInstance, services: RouteServices) => void | Promise<void>;

export const ROUTE_GROUPS: readonly RouteGroup[] = [
  (app, { auth, metrics }) => registerAuthRoutes(app, { auth, metrics }),
  (app, { status, version }) => registerSystemRoutes(app, { status, version }),
  (app, { runs }) => registerRunRoutes(app, { runs }),
  (app, { jobs, sse }) => registerJobRoutes(app, { jobs, sse }),
  (app, { usage }) => registerUsageRoutes(app, { usage }),
  (app, { workspaces, cloner }) => registerWorkspaceRoutes(app, { workspaces, ...(cloner ? { cloner } : {}) }),
  (app, { workspaces, archive }) => registerWorkspaceArchiveRoutes(app, { workspaces, settings: archive }),
  (app, { runs, sse }) => registerStreamRoutes(app, { runs, sse }),
  (app, { agents, sse, cluster }) => registerAgentRoutes(app, { agents, sse, ...(cluster ? { cluster: cluster.forwarding } : {}) }),
  (app, { sessions }) => registerSessionRoutes(app, { sessions }),
  (app, { images, sse }) => registerImageRoutes(app, { images, sse }),
  (app, { version }) => registerMcpRoutes(app, { version: version.version }),
  (app, { consoleDir }) => registerConsoleRoutes(app, { dir: consoleDir }),
];
