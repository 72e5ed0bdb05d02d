// Persistent agents: the caller's agents with their statuses, and a form to spawn one.
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { StatusBadge } from '../components/status-badge.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { Link, navigate } from '../router.js';

const REFRESH_MS = 3000;

export function AgentsPage() {
  const berth = useBerth();
  const agents = useResource((signal) => berth.agents.list({ signal }), [berth], { refreshMs: REFRESH_MS });
  const list = agents.value?.agents ?? [];
  return (
    <Page title="Agents">
      <SpawnForm />
      <section class="card" aria-labelledby="agents-heading">
        <h2 id="agents-heading">Agents</h2>
        <ErrorMessage error={agents.error} context="Agents could not be read" />
        {agents.value && list.length === 0 ? (
          <p class="empty">No agents. Spawn one above, then chat with it on its page.</p>
        ) : (
          <table>
            <caption class="visually-hidden">Agents, oldest first; statuses refresh every {REFRESH_MS / 1000} seconds</caption>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Status</th>
                <th scope="col">Turns</th>
                <th scope="col">Last activity</th>
              </tr>
            </thead>
            <tbody>
              {list.map((agent) => (
                <tr key={agent.id}>
                  <td>
                    <Link href={`/agents/${encodeURIComponent(agent.id)}`}>
                      <code>{agent.id}</code>
                    </Link>
                  </td>
                  <td>
                    <StatusBadge status={agent.status} />
                  </td>
                  <td>{agent.turns_completed}</td>
                  <td>
                    <Time iso={agent.last_activity_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </Page>
  );
}

function SpawnForm() {
  const berth = useBerth();
  const [workdir, setWorkdir] = useState('');
  const [idleTimeout, setIdleTimeout] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();

  const spawn = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const agent = await berth.agents.spawn({
        ...(workdir.trim() ? { workdir: workdir.trim() } : {}),
        ...(idleTimeout.trim() ? { idle_timeout_seconds: Number(idleTimeout) } : {}),
      });
      navigate(`/agents/${encodeURIComponent(agent.id)}`);
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };

  return (
    <section class="card" aria-labelledby="spawn-heading">
      <h2 id="spawn-heading">Spawn an agent</h2>
      <form class="form" onSubmit={spawn}>
        <div class="row">
          <div>
            <label for="spawn-workdir">Working directory (optional)</label>
            <input id="spawn-workdir" name="workdir" placeholder="/workspace" value={workdir} onInput={(e) => setWorkdir(e.currentTarget.value)} />
          </div>
          <div>
            <label for="spawn-idle">Idle timeout in seconds (optional)</label>
            <input
              id="spawn-idle"
              name="idle_timeout_seconds"
              type="number"
              min={0}
              step={1}
              inputMode="numeric"
              aria-describedby="spawn-idle-help"
              value={idleTimeout}
              onInput={(e) => setIdleTimeout(e.currentTarget.value)}
            />
            <p id="spawn-idle-help" class="help">
              Empty or 0: the server's default.
            </p>
          </div>
        </div>
        <ErrorMessage error={error} context="The agent was not spawned" />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Spawning…' : 'Spawn agent'}
          </button>
        </div>
      </form>
    </section>
  );
}
