// Which node may run an async job on a shared database (issue 26). A job whose run needs only what every
// node has may be claimed by any node; one that needs what is on its accepting node's disk or Podman is pinned
// to that node: a named workspace (its disk is on one host), host volumes, Podman secrets, a compose
// environment (its stack and build context). A session to resume, continue or fork is pinned only while a
// session's workspace stays on its node: with SERVICE_SHARED_DIR every session is saved to PostgreSQL at the
// end of each run (core/sessions/shared-sessions.ts), its workspace to the shared directory
// (core/workspaces/shared-workspaces.ts), and both are restored before use on any node. A job another node
// fails to accept again for a reason this list does not foresee (an image only its accepting node has) is
// handed back to that node, pinned.
import type { RunPlan } from '../run-plan.js';

/** `sessionsMove`: sessions and their workspaces are restored on any node (SERVICE_SHARED_DIR is set). */
export function runsOnAnyNode(plan: RunPlan, sessionsMove: boolean): boolean {
  return (
    (sessionsMove || plan.session.kind === 'new' || plan.session.kind === 'ephemeral') &&
    plan.workspace.kind !== 'given' &&
    plan.container.volumes.length === 0 &&
    plan.container.secretsEnv.length === 0 &&
    plan.container.environment === undefined
  );
}

/**
 * A job of an earlier session that waits in the shared queue for any node: its accepting node lets go of the
 * session before the job is queued (JobService.submit). Held, its release would save this node's unchanged
 * copy as a newer version, which could land between another node's restore and its save of the job's turn
 * (that turn would then be refused as a concurrent save), and a fork's release removes the fork's directory.
 */
export function letsGoOfSessionWhileQueued(plan: RunPlan): boolean {
  return plan.session.kind === 'resume' || plan.session.kind === 'continue' || plan.session.kind === 'fork';
}
