// The caller's sessions, most recently active first, with their titles (set from each one's first prompt).
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { Pager } from '../components/pager.js';
import { useResource } from '../hooks/use-resource.js';
import { Link } from '../router.js';
import { RefreshButton } from '../components/refresh-button.js';

const PAGE_SIZE = 20;

export function SessionsPage() {
  const berth = useBerth();
  const sessions = useResource((signal) => berth.sessions.list({ signal }), [berth]);
  const [offset, setOffset] = useState(0);
  const all = sessions.value?.sessions ?? [];
  // GET /sessions answers the whole list; the page shows it a screenful at a time.
  const page = all.slice(offset, offset + PAGE_SIZE);

  return (
    <Page
      title="Sessions"
      actions={
        <RefreshButton resource={sessions} />
      }
    >
      <ErrorMessage error={sessions.error} context="Sessions could not be read" />
      {sessions.value && all.length === 0 && <p class="empty">No sessions yet: every run starts one.</p>}
      {page.length > 0 && (
        <section class="card">
          <ul class="session-list">
            {page.map((session) => (
              <li key={session.id}>
                <Link href={`/sessions/${encodeURIComponent(session.id)}`}>{session.title || 'Untitled session'}</Link>
                <code class="id">{session.id}</code>
                {session.stack && (
                  <span class="help">
                    {' '}
                    compose stack: {session.stack.services.join(', ')}
                    {session.stack.in_use ? ' (in use)' : ''}
                  </span>
                )}
              </li>
            ))}
          </ul>
          <Pager offset={offset} pageSize={PAGE_SIZE} count={page.length}
            hasMore={all.length > offset + PAGE_SIZE} onOffset={setOffset} label="Sessions pages" />
        </section>
      )}
    </Page>
  );
}
