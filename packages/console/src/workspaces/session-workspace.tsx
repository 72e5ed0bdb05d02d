// A session's workspace on its page: the workspace whose `sessions` names the session (GET /workspaces
// lists the caller's workspaces, a session's own among them), with its files. Sessions from before
// workspaces, and runs that kept nothing, have none.
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { FileBrowser } from '../components/file-browser.js';
import { useResource } from '../hooks/use-resource.js';
import { Link } from '../router.js';

export function SessionWorkspace({ sessionId }: { sessionId: string }) {
  const berth = useBerth();
  const found = useResource(
    async (signal) => (await berth.workspaces.list({ signal })).workspaces.find((workspace) => workspace.sessions.includes(sessionId)),
    [berth, sessionId],
  );
  if (found.error) return <ErrorMessage error={found.error} context="The session's workspace could not be read" />;
  if (!found.value) return found.loading ? null : <p class="help">This session has no workspace.</p>;
  const workspace = found.value;
  return (
    <>
      <p class="help">
        Workspace{' '}
        <Link href={`/workspaces/${encodeURIComponent(workspace.id)}`}>
          <code>{workspace.id}</code>
        </Link>
        {workspace.owner_session === sessionId ? ' (the session’s own: deleted with it)' : ''}
      </p>
      <FileBrowser workspaceId={workspace.id} />
    </>
  );
}
