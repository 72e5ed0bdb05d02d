// The service's health, what is running, and whether the engine can run (GET /health, /version, /claude/status).
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { StatusBadge } from '../components/status-badge.js';
import { useResource } from '../hooks/use-resource.js';

const REFRESH_MS = 10_000;

export function HealthPage() {
  const berth = useBerth();
  const health = useResource((signal) => berth.health({ signal }), [berth], { refreshMs: REFRESH_MS });
  const version = useResource((signal) => berth.version({ signal }), [berth]);
  const engine = useResource((signal) => berth.claudeStatus({ signal }), [berth], { refreshMs: REFRESH_MS });
  return (
    <Page title="Health">
      <section class="card" aria-labelledby="health-heading">
        <h2 id="health-heading">Service</h2>
        <ErrorMessage error={health.error} context="GET /health failed" />
        {health.value && (
          <>
            <p role="status">
              Berth is <StatusBadge status={health.value.status} />
            </p>
            <table>
              <caption class="visually-hidden">Components</caption>
              <thead>
                <tr>
                  <th scope="col">Component</th>
                  <th scope="col">Status</th>
                </tr>
              </thead>
              <tbody>
                {health.value.components.map((component) => (
                  <tr key={component.name}>
                    <td>{component.name}</td>
                    <td>
                      <StatusBadge status={component.status} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </>
        )}
      </section>
      <section class="card" aria-labelledby="engine-heading">
        <h2 id="engine-heading">Engine</h2>
        <ErrorMessage error={engine.error} context="GET /claude/status failed" />
        {engine.value && (
          <p>
            <StatusBadge status={engine.value.configured ? 'configured' : 'not_configured'} /> {engine.value.message}
          </p>
        )}
      </section>
      <section class="card" aria-labelledby="version-heading">
        <h2 id="version-heading">Version</h2>
        <ErrorMessage error={version.error} context="GET /version failed" />
        {version.value && (
          <dl class="facts">
            <dt>Berth</dt>
            <dd>{version.value.version}</dd>
            <dt>API version</dt>
            <dd>{version.value.api_version}</dd>
            <dt>Engine</dt>
            <dd>{version.value.engine_version}</dd>
            <dt>Engine image</dt>
            <dd>
              <code>{version.value.engine_image}</code>
            </dd>
            <dt>Agent image</dt>
            <dd>
              <code>{version.value.agent_image}</code>
            </dd>
            {version.value.commit && (
              <>
                <dt>Commit</dt>
                <dd>
                  <code>{version.value.commit}</code>
                </dd>
              </>
            )}
          </dl>
        )}
      </section>
    </Page>
  );
}
