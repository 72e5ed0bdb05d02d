// Which node may run an async job on a shared database (issue 26). A job whose run needs only what every
// node has (the request, the images of the cluster) may be claimed by any node; one that needs what is on its
// accepting node's disk or Podman is pinned to that node: a session to resume, continue or fork (the sessions'
// directories are the node's own), a named workspace (its disk is on one host), host volumes, Podman secrets,
// a compose environment (its stack and build context). A job another node fails to accept again for a reason
// this list does not foresee (an image only its accepting node has) is handed back to that node, pinned.
import type { RunPlan } from '../run-plan.js';

export function runsOnAnyNode(plan: RunPlan): boolean {
  return (
    (plan.session.kind === 'new' || plan.session.kind === 'ephemeral') &&
    plan.workspace.kind !== 'given' &&
    plan.container.volumes.length === 0 &&
    plan.container.secretsEnv.length === 0 &&
    plan.container.environment === undefined
  );
}
