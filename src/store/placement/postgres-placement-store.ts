// Where things run, for any node of the cluster (issue 26): the node whose Podman runs an agent or a job, with
// that node's URL and whether it holds a live lease, read across the agents, jobs and nodes tables (which
// their own stores create and write). Used to forward a request that reached the wrong node
// (core/cluster/forwarding.ts), to list a caller's agents on every node, and to answer from the record
// for an agent whose node is gone. Every time is the database's: nodes whose clocks differ agree on a lease.
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import type { AgentStatus } from '../agents/agent-store.js';
import type { JobStatus } from '../jobs/job-store.js';

/** A node as another node reaches it. */
export interface NodeAddress {
  readonly name: string;
  readonly url: string;
  /** Its lease is held (not released, not lapsed): it answers for what it runs. */
  readonly live: boolean;
}

/** What a snapshot of an agent shows, as its owner node last wrote it. */
export interface AgentPlacement {
  readonly id: string;
  readonly owner: string;
  readonly sessionId: string;
  readonly status: AgentStatus;
  readonly createdAt: string;
  readonly lastActivityAt: string;
  readonly idleTimeoutSeconds: number;
  readonly idleTimeoutDisabled: boolean;
  readonly turnsCompleted: number;
  readonly exitError: string | null;
  /** The node that runs it; undefined when that node never registered (its row removed by hand). */
  readonly node: NodeAddress | undefined;
  readonly nodeName: string;
}

export interface JobPlacement {
  readonly id: string;
  readonly owner: string;
  readonly status: JobStatus;
  /** Taken from the queue by a node (which then runs it): `node` is that node. */
  readonly claimed: boolean;
  /** The node that claimed it, or, while nobody has, the node that accepted it; undefined when none is recorded. */
  readonly node: NodeAddress | undefined;
}

export interface PlacementStore {
  agent(id: string): Promise<AgentPlacement | undefined>;
  /** The caller's agents on every node, oldest first. */
  agentsOf(owner: string): Promise<AgentPlacement[]>;
  job(id: string): Promise<JobPlacement | undefined>;
  /** Deletes an exited agent's record (DELETE of an agent whose node is gone); answers whether it was there. */
  forgetExitedAgent(id: string, owner: string): Promise<boolean>;
  close(): Promise<void>;
}

interface AgentRow {
  id: string;
  owner: string;
  session_id: string;
  status: AgentStatus;
  created_at: Date;
  last_activity_at: Date;
  idle_timeout_seconds: number;
  idle_timeout_disabled: boolean;
  turns_completed: number;
  exit_error: string | null;
  node: string;
  url: string | null;
  live: boolean | null;
}

/** The node's columns beside a row that names it; `live` on the database's clock. */
const NODE_COLUMNS = 'n.url AS url, (n.released_at IS NULL AND n.expires_at > now()) AS live';
const AGENT_COLUMNS = `a.id, a.owner, a.session_id, a.status, a.created_at, a.last_activity_at, a.idle_timeout_seconds,
  a.idle_timeout_disabled, a.turns_completed, a.exit_error::text AS exit_error, a.node, ${NODE_COLUMNS}`;

function nodeOf(name: string | null, url: string | null, live: boolean | null): NodeAddress | undefined {
  return name === null || url === null ? undefined : { name, url, live: live === true };
}

function toAgent(row: AgentRow): AgentPlacement {
  return {
    id: row.id,
    owner: row.owner,
    sessionId: row.session_id,
    status: row.status,
    createdAt: row.created_at.toISOString(),
    lastActivityAt: row.last_activity_at.toISOString(),
    idleTimeoutSeconds: row.idle_timeout_seconds,
    idleTimeoutDisabled: row.idle_timeout_disabled,
    turnsCompleted: row.turns_completed,
    exitError: row.exit_error === null ? null : (JSON.parse(row.exit_error) as string),
    node: nodeOf(row.node, row.url, row.live),
    nodeName: row.node,
  };
}

export class PostgresPlacementStore implements PlacementStore {
  private constructor(private readonly db: StoreQueries) {}

  /** Reads the tables of the agent, job and node stores: opened after them (they apply their migrations). */
  static open(database: PostgresDatabase): PostgresPlacementStore {
    return new PostgresPlacementStore(new StoreQueries(database, 'placement'));
  }

  async agent(id: string): Promise<AgentPlacement | undefined> {
    const rows = await this.db.query<AgentRow>(`SELECT ${AGENT_COLUMNS} FROM agents a LEFT JOIN nodes n ON n.name = a.node WHERE a.id = $1`, [id]);
    return rows[0] && toAgent(rows[0]);
  }

  async agentsOf(owner: string): Promise<AgentPlacement[]> {
    const rows = await this.db.query<AgentRow>(
      `SELECT ${AGENT_COLUMNS} FROM agents a LEFT JOIN nodes n ON n.name = a.node WHERE a.owner = $1 ORDER BY a.created_at, a.id`,
      [owner],
    );
    return rows.map(toAgent);
  }

  async job(id: string): Promise<JobPlacement | undefined> {
    const rows = await this.db.query<{ id: string; owner: string; status: JobStatus; claimed: boolean; node: string | null; url: string | null; live: boolean | null }>(
      `SELECT j.id, j.owner, j.status, j.claimed_by IS NOT NULL AS claimed, j.node, ${NODE_COLUMNS}
       FROM jobs j LEFT JOIN nodes n ON n.name = j.node WHERE j.id = $1`,
      [id],
    );
    const row = rows[0];
    return row && { id: row.id, owner: row.owner, status: row.status, claimed: row.claimed, node: nodeOf(row.node, row.url, row.live) };
  }

  async forgetExitedAgent(id: string, owner: string): Promise<boolean> {
    const rows = await this.db.query("DELETE FROM agents WHERE id = $1 AND owner = $2 AND status = 'exited' RETURNING id", [id, owner]);
    return rows.length === 1;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
