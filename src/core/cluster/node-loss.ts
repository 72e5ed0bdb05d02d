// Losing a node (issue 26; docs/jobs.md "A lost node"): every third of the lease, each live node looks for
// nodes whose lease lapsed without a release (NodeRegistry.expiredNodes). One live node at a time handles a
// lost node (a compare-and-set on its row, for a bounded time: a handler that dies mid-way is replaced), and
// from then on the lost process cannot renew its lease. The handler takes its work over:
// - jobs (JobService.takeOverLostNode): those it claimed and never started go back to the queue (nothing of
//   them ran); those it ran crash with `node_lost` and their webhooks are sent by the handler, once each
//   (every move is a compare-and-set on the job); its pending jobs only it could run crash too; the
//   webhooks it owed are sent by the handler;
// - agents: its live agents become exited with exit_error `node_lost: ...` (their sessions stay, to resume);
// then the loss is recorded as handled. Should the lost node come back, its start finds none of these jobs or
// agents running under it and removes their containers; if it was only paused, its next heartbeat fails and
// it aborts its jobs at once.
import type { Logger } from 'pino';
import type { NodeRegistry } from './node-registry.js';

/** The exit_error of an agent whose node was lost (starts with `node_lost`, what clients match). */
export function agentNodeLostError(node: string): string {
  return `node_lost: the node running the agent (${node}) was lost (its lease lapsed); its session can be resumed on another node`;
}

export interface NodeLossHandlers {
  readonly jobs: { takeOverLostNode(node: string): Promise<{ readonly crashed: number; readonly webhooks: number }> };
  readonly agents: { markNodeLost(node: string, exitError: string, at: string): Promise<readonly string[]> };
}

export interface NodeLossOptions {
  readonly registry: Pick<NodeRegistry, 'expiredNodes' | 'takeLoss' | 'lossHandled'>;
  readonly handlers: NodeLossHandlers;
  /** The lease's length: checks run every third of it, and a handler holds the handling for one lease. */
  readonly leaseMs: number;
  readonly log: Logger;
  readonly now?: () => number;
}

export class NodeLossWatcher {
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;

  constructor(private readonly options: NodeLossOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.checkSoon(), Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
    void this.checkSoon();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
  }

  /** One pass: every lost node not handled yet, handled if this node gets the handling. */
  async check(): Promise<void> {
    const { registry, log } = this.options;
    for (const lost of await registry.expiredNodes()) {
      if (!(await registry.takeLoss(lost.name, this.options.leaseMs))) continue;
      log.warn({ node: lost.name, url: lost.url, leaseEnded: lost.expiresAt }, 'a node was lost (its lease lapsed): taking its work over');
      const at = new Date((this.options.now ?? Date.now)()).toISOString();
      const jobs = await this.options.handlers.jobs.takeOverLostNode(lost.name);
      const agents = await this.options.handlers.agents.markNodeLost(lost.name, agentNodeLostError(lost.name), at);
      await registry.lossHandled(lost.name);
      log.warn({ node: lost.name, crashedJobs: jobs.crashed, webhooks: jobs.webhooks, exitedAgents: agents.length }, 'the lost node\'s work is taken over');
    }
  }

  private checkSoon(): Promise<void> {
    this.checking ??= this.check()
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'handling lost nodes failed; the next check retries'))
      .finally(() => (this.checking = undefined));
    return this.checking;
  }
}
