// One workspace: what it is (size, files, sessions using it) and its files (components/file-browser.tsx).
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { FileBrowser } from '../components/file-browser.js';
import { Page } from '../components/page.js';
import { RefreshButton } from '../components/refresh-button.js';
import { Time } from '../components/time.js';
import { formatBytes } from '../format.js';
import { useResource } from '../hooks/use-resource.js';
import { Link } from '../router.js';

export function WorkspacePage({ id }: { id: string }) {
  const berth = useBerth();
  const workspace = useResource((signal) => berth.workspaces.get(id, { signal }), [berth, id]);
  const w = workspace.value;
  return (
    <Page title={`Workspace ${id.slice(0, 8)}`} actions={<RefreshButton resource={workspace} />}>
      <p>
        <Link href="/workspaces">← All workspaces</Link>
      </p>
      <ErrorMessage error={workspace.error} context="The workspace could not be read" />
      {w && (
        <section class="card">
          <dl class="facts">
            <dt>Id</dt>
            <dd>
              <code>{w.id}</code>
            </dd>
            <dt>Size</dt>
            <dd>
              {formatBytes(w.size_bytes)} of {formatBytes(w.max_bytes)}
            </dd>
            <dt>Files</dt>
            <dd>
              {w.file_count} of {w.max_files}
            </dd>
            <dt>Source</dt>
            <dd>{w.source}</dd>
            <dt>In use</dt>
            <dd>{w.in_use ? 'yes, by a run or agent' : 'no'}</dd>
            <dt>Sessions</dt>
            <dd>
              {w.sessions.length === 0
                ? 'none'
                : w.sessions.map((session, i) => (
                    <span key={session}>
                      {i > 0 && ', '}
                      <Link href={`/sessions/${encodeURIComponent(session)}`}>
                        <code>{session}</code>
                      </Link>
                    </span>
                  ))}
            </dd>
            <dt>Created</dt>
            <dd>
              <Time iso={w.created_at} />
            </dd>
            <dt>Last used</dt>
            <dd>
              <Time iso={w.last_used_at} />
            </dd>
          </dl>
        </section>
      )}
      {w && <FileBrowser workspaceId={w.id} />}
    </Page>
  );
}
