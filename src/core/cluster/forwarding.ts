// Any node, any request (issue 26): an agent lives on one node (its container on that node's Podman, its
// events published in that process), and a running job's cancel and live stream need the node that runs it.
// A request for one that reaches another node is forwarded to the owner's SERVICE_NODE_URL
// (http/plugins/forward.ts); this decides where a request goes. The caller is checked here only to answer a
// stranger exactly as the owner would (404, without a round trip): the owner node authenticates the forwarded
// request again and decides for itself, and never trusts who the forwarding node says the caller is.
import type { AgentPlacement, JobPlacement, PlacementStore } from '../../store/placement/postgres-placement-store.js';

/** Who asks (core/auth/caller.ts's Caller: cluster stands below auth in core's order). */
interface Caller {
  readonly owner: string;
}

/** Sent with every forwarded request: its receiver never forwards it again (loops are impossible). */
export const FORWARDED_FROM_HEADER = 'x-berth-forwarded-from';

/** Where a request goes. */
export type Destination =
  /** This node answers, with what it has (a stranger's or unknown id: 404, as everywhere). */
  | { readonly kind: 'here' }
  /** The node that runs it, live: the request is forwarded there. */
  | { readonly kind: 'owner'; readonly node: string; readonly url: string }
  /** An agent whose node holds no live lease: answered from its record (exited agents), or 503. */
  | { readonly kind: 'record'; readonly agent: AgentPlacement };

const HERE: Destination = { kind: 'here' };

/** An agent's snapshot as its record says (the API's AgentSnapshot, core/agents/agent-types.ts). */
export interface RecordedAgentSnapshot {
  readonly id: string;
  readonly session_id: string;
  readonly status: AgentPlacement['status'];
  readonly created_at: string;
  readonly last_activity_at: string;
  readonly idle_timeout_seconds: number;
  readonly turns_completed: number;
  readonly idle_timeout_disabled?: true;
  readonly exit_error?: string;
}

export function snapshotOfRecord(agent: AgentPlacement): RecordedAgentSnapshot {
  return {
    id: agent.id,
    session_id: agent.sessionId,
    status: agent.status,
    created_at: agent.createdAt,
    last_activity_at: agent.lastActivityAt,
    idle_timeout_seconds: agent.idleTimeoutSeconds,
    turns_completed: agent.turnsCompleted,
    ...(agent.idleTimeoutDisabled ? { idle_timeout_disabled: true as const } : {}),
    ...(agent.exitError !== null ? { exit_error: agent.exitError } : {}),
  };
}

export class ClusterForwarding {
  constructor(
    private readonly placement: PlacementStore,
    /** This node's SERVICE_NODE_NAME. */
    readonly node: string,
  ) {}

  /** Where a request for agent `id` goes, for an agent this process does not run. */
  async agent(id: string, caller: Caller): Promise<Destination> {
    const agent = await this.placement.agent(id);
    // Unknown, another caller's, or this node's own (its process forgot it): answered here, as one node does.
    if (!agent || agent.owner !== caller.owner || agent.nodeName === this.node) return HERE;
    if (agent.node?.live) return { kind: 'owner', node: agent.node.name, url: agent.node.url };
    return { kind: 'record', agent };
  }

  /**
   * Where a job's live stream or cancel goes: to the node that claimed it while it waits there for a slot or
   * runs there (that process holds its container and publishes its live events); anything else (unclaimed,
   * finished) is answered here from the shared store.
   */
  async job(id: string, caller: Caller): Promise<Destination> {
    const job = await this.placement.job(id);
    if (!job || job.owner !== caller.owner || !this.runsElsewhere(job)) return HERE;
    return { kind: 'owner', node: job.node!.name, url: job.node!.url };
  }

  /** The caller's agents that other nodes run (their records), for a listing across the cluster. */
  async agentsElsewhere(caller: Caller): Promise<RecordedAgentSnapshot[]> {
    const agents = await this.placement.agentsOf(caller.owner);
    return agents.filter((agent) => agent.nodeName !== this.node).map(snapshotOfRecord);
  }

  /** DELETE of an exited agent whose node is gone: its record is forgotten (as its node would at DELETE). */
  forgetExited(id: string, caller: Caller): Promise<boolean> {
    return this.placement.forgetExitedAgent(id, caller.owner);
  }

  private runsElsewhere(job: JobPlacement): boolean {
    if (!job.node || job.node.name === this.node || !job.node.live) return false;
    // An unclaimed job is cancelled by a compare-and-set on its row, from any node, and a finished one is all in
    // the store; a claimed one is started, stopped, and its live events published, by the process that claimed it.
    return job.status === 'running' || (job.status === 'pending' && job.claimed);
  }
}
