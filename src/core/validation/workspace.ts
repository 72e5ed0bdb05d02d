// The request's `workspace` field: a UUID (the caller's workspace, checked against the store when the run
// takes its session) and where it lands. A workspace is mounted at the workdir, so nothing else may cover
// the workdir: a caller volume (or a compose service mount) at the workdir or above it, or the run disk's
// own places (/tmp, /var/tmp, HOME), would hide it, and the run would silently work elsewhere.
import { errors } from '../../errors.js';
import { ENGINE_HOME } from '../../engine/layout.js';
import type { SessionIntent, WorkspaceIntent } from '../run-plan.js';
import { UUID_PATTERN } from '../../uuid.js';
import { checkCharacters } from './text.js';
import { isUnder } from './volumes.js';

/** The container paths a run's disk mounts itself (core/containers/engine-container.ts diskMounts). */
const DISK_PLACES = ['/tmp', '/var/tmp', ENGINE_HOME] as const;

/**
 * Which workspace the request asks for. `coveringPaths`: container paths of the run's other mounts
 * (caller volumes, the compose agent service's mounts). Refused (400 naming `workspace`): a value that is
 * not a UUID, a workdir something else covers. Without `workspace`, a covered workdir keeps today's meaning
 * (the caller's volume is the workdir): the session gets no workspace.
 */
export function workspaceIntent(
  workspace: string | undefined,
  session: SessionIntent,
  workdir: string,
  coveringPaths: readonly string[],
): WorkspaceIntent {
  const cover = [...coveringPaths, ...DISK_PLACES].find((path) => isUnder(workdir, path));
  if (workspace === undefined) {
    if (session.kind === 'ephemeral' || cover !== undefined) return { kind: 'none' };
    return { kind: 'session' };
  }
  checkCharacters(workspace, 'workspace', false);
  if (!UUID_PATTERN.test(workspace)) {
    throw errors.invalid(`workspace: "${workspace}" is not a workspace id (a UUID, as POST /workspaces answers)`);
  }
  if (cover !== undefined) {
    throw errors.invalid(
      `workspace: is mounted at the workdir ${workdir}, which ${cover === workdir ? 'is' : 'is under'} ${cover}, ${
        (DISK_PLACES as readonly string[]).includes(cover) ? 'a place of the run\'s own disk' : 'the target of another mount (container.volumes or the environment\'s service)'
      }; choose another workdir or drop that mount`,
    );
  }
  return { kind: 'given', id: workspace.toLowerCase() };
}
