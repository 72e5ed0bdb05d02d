// The console's frame: the connection to Berth (sign-in when the server asks for a token), the navigation
// and the page the address names.
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { connect, signIn, signOut, type Connection } from './auth/connection.js';
import { SessionContext, type ConsoleSession } from './berth-context.js';
import { ErrorMessage } from './components/error-message.js';
import { Page } from './components/page.js';
import { AgentPage } from './pages/agent.js';
import { AgentsPage } from './pages/agents.js';
import { HealthPage } from './pages/health.js';
import { ImagePage } from './pages/image.js';
import { ImagesPage } from './pages/images.js';
import { JobPage } from './pages/job.js';
import { JobsPage } from './pages/jobs.js';
import { SessionPage } from './pages/session.js';
import { SessionsPage } from './pages/sessions.js';
import { SignIn } from './pages/sign-in.js';
import { UsagePage } from './pages/usage.js';
import { UsageRunPage } from './pages/usage-run.js';
import { WorkspacePage } from './pages/workspace.js';
import { WorkspacesPage } from './pages/workspaces.js';
import { Link, LocationProvider, navigate, NavLink, Router, useLocation, type Route } from './router.js';

const ROUTES: readonly Route[] = [
  { pattern: '/jobs', render: () => <JobsPage /> },
  { pattern: '/jobs/:id', render: ({ id }) => <JobPage key={id} id={id!} /> },
  { pattern: '/sessions', render: () => <SessionsPage /> },
  { pattern: '/sessions/:id', render: ({ id }) => <SessionPage key={id} id={id!} /> },
  { pattern: '/workspaces', render: () => <WorkspacesPage /> },
  { pattern: '/workspaces/:id', render: ({ id }) => <WorkspacePage key={id} id={id!} /> },
  { pattern: '/agents', render: () => <AgentsPage /> },
  { pattern: '/agents/:id', render: ({ id }) => <AgentPage key={id} id={id!} /> },
  { pattern: '/usage', render: () => <UsagePage /> },
  { pattern: '/usage/runs/:id', render: ({ id }) => <UsageRunPage key={id} id={id!} /> },
  { pattern: '/images', render: () => <ImagesPage /> },
  { pattern: '/images/detail', render: () => <ImageRoute /> },
  { pattern: '/health', render: () => <HealthPage /> },
];

function ImageRoute() {
  const name = useLocation().query.get('name') ?? '';
  return <ImagePage key={name} name={name} />;
}

function NotFound() {
  const { path } = useLocation();
  useEffect(() => {
    if (path === '/') navigate('/jobs', { replace: true });
  }, [path]);
  if (path === '/') return null;
  return (
    <Page title="Page not found">
      <p>
        The console has no page at <code>{path}</code>. <Link href="/jobs">Go to runs &amp; jobs</Link>.
      </p>
    </Page>
  );
}

export function App() {
  return (
    <LocationProvider>
      <Console />
    </LocationProvider>
  );
}

function Console() {
  const [connection, setConnection] = useState<Connection>({ state: 'checking' });
  const start = useCallback(() => {
    setConnection({ state: 'checking' });
    void connect().then(setConnection);
  }, []);
  useEffect(start, [start]);

  const session = useMemo<ConsoleSession | undefined>(
    () =>
      connection.state === 'signed-in'
        ? {
            berth: connection.berth,
            subject: connection.subject,
            signOut: (notice?: string) => void signOut(connection).then(() => setConnection({ state: 'signed-out', notice })),
          }
        : undefined,
    [connection],
  );

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="top">
        <div class="brand">
          <img src={`${import.meta.env.BASE_URL}favicon.svg`} alt="" width={24} height={24} />
          <span>Berth console</span>
        </div>
        {session && (
          <nav aria-label="Main">
            <ul>
              <li>
                <NavLink href="/jobs">Runs &amp; jobs</NavLink>
              </li>
              <li>
                <NavLink href="/sessions">Sessions</NavLink>
              </li>
              <li>
                <NavLink href="/workspaces">Workspaces</NavLink>
              </li>
              <li>
                <NavLink href="/agents">Agents</NavLink>
              </li>
              <li>
                <NavLink href="/usage">Usage</NavLink>
              </li>
              <li>
                <NavLink href="/images">Images</NavLink>
              </li>
              <li>
                <NavLink href="/health">Health</NavLink>
              </li>
            </ul>
          </nav>
        )}
        {session && connection.state === 'signed-in' && (
          <div class="who">
            {connection.open ? (
              <span class="help">No sign-in needed: this server checks no tokens</span>
            ) : (
              <>
                <span class="help">Signed in as {session.subject}</span>
                <button type="button" onClick={() => session.signOut('You are signed out.')}>
                  Sign out
                </button>
              </>
            )}
          </div>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {connection.state === 'checking' && (
          <p role="status" class="help">
            Connecting to Berth…
          </p>
        )}
        {connection.state === 'unreachable' && (
          <Page title="Berth is not answering">
            <ErrorMessage error={connection.error} />
            <button type="button" onClick={start}>
              Try again
            </button>
          </Page>
        )}
        {connection.state === 'signed-out' && (
          <SignIn notice={connection.notice} onSignIn={async (token) => setConnection(await signIn(token))} />
        )}
        {session && (
          <SessionContext.Provider value={session}>
            <Router routes={ROUTES} fallback={NotFound} />
          </SessionContext.Provider>
        )}
      </main>
    </>
  );
}
