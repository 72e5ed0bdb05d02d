// The caller's workspaces: the file trees runs mount at their workdir (made with `berth push`, the SDK,
// or by a session for itself), with their size and who uses them.
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { RefreshButton } from '../components/refresh-button.js';
import { Time } from '../components/time.js';
import { formatBytes } from '../format.js';
import { useResource } from '../hooks/use-resource.js';
import { Link } from '../router.js';

export function WorkspacesPage() {
  const berth = useBerth();
  const workspaces = useResource((signal) => berth.workspaces.list({ signal }), [berth]);
  const list = [...(workspaces.value?.workspaces ?? [])].sort((a, b) => b.last_used_at.localeCompare(a.last_used_at));
  return (
    <Page title="Workspaces" actions={<RefreshButton resource={workspaces} />}>
      <ErrorMessage error={workspaces.error} context="Workspaces could not be read" />
      {workspaces.value && list.length === 0 && (
        <p class="empty">
          No workspaces yet: <code>berth push DIR</code> uploads one, and every new session gets its own.
        </p>
      )}
      {list.length > 0 && (
        <section class="card">
          <table>
            <caption class="visually-hidden">Workspaces, most recently used first</caption>
            <thead>
              <tr>
                <th scope="col">Workspace</th>
                <th scope="col">Source</th>
                <th scope="col">Size</th>
                <th scope="col">Files</th>
                <th scope="col">Last used</th>
              </tr>
            </thead>
            <tbody>
              {list.map((workspace) => (
                <tr key={workspace.id}>
                  <td>
                    <Link href={`/workspaces/${encodeURIComponent(workspace.id)}`}>
                      <code>{workspace.id}</code>
                    </Link>
                    {workspace.in_use && <span class="badge badge-busy">in use</span>}
                  </td>
                  <td>{workspace.owner_session ? 'a session’s own' : workspace.source}</td>
                  <td>{formatBytes(workspace.size_bytes)}</td>
                  <td>{workspace.file_count}</td>
                  <td>
                    <Time iso={workspace.last_used_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </Page>
  );
}
