// The holder a run's or an agent's credential is bound to, from its plan: its caller, its session, its
// egress policy (container.network) and its budget (engine.max_budget_usd, enforced by the gateway).
import type { RunPlan } from '../run-plan.js';
import type { GrantHolder } from './gateway-types.js';

export function engineHolder(options: {
  readonly kind: 'run' | 'agent';
  /** The container's id (its berth.run label): the grant's key. */
  readonly runId: string;
  readonly caller: string;
  readonly sessionId: string;
  readonly plan: Pick<RunPlan, 'container' | 'engine'>;
  readonly agentId?: string;
}): GrantHolder {
  const budgetUsd = options.plan.engine.max_budget_usd;
  return {
    kind: options.kind,
    runId: options.runId,
    caller: options.caller,
    sessionId: options.sessionId,
    ...(options.agentId !== undefined ? { agentId: options.agentId } : {}),
    policy: options.plan.container.network,
    ...(budgetUsd !== undefined ? { budgetUsd } : {}),
  };
}
