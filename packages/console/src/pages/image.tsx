// One local image: its rank, whether runs may use it, and the tools it has.
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { formatBytes } from '../format.js';
import { useResource } from '../hooks/use-resource.js';
import { rankText } from '../images.js';
import { Link } from '../router.js';

export function ImagePage({ name }: { name: string }) {
  const berth = useBerth();
  const image = useResource((signal) => berth.images.get(name, { signal }), [berth, name]);
  const value = image.value;
  return (
    <Page title={`Image ${name}`}>
      <p>
        <Link href="/images">← All images</Link>
      </p>
      <ErrorMessage error={image.error} context="The image could not be read" />
      {value && (
        <section class="card">
          <dl class="facts">
            <dt>Repository</dt>
            <dd>
              <code>{value.repository}</code>
            </dd>
            <dt>Tag</dt>
            <dd>{value.tag ? <code>{value.tag}</code> : '— (named by digest)'}</dd>
            <dt>Id</dt>
            <dd>
              <code>{value.id}</code>
            </dd>
            <dt>Size</dt>
            <dd>{formatBytes(value.size)}</dd>
            <dt>Compatibility rank</dt>
            <dd>
              <span class={`rank rank-${value.compatibility_rank}`}>{value.compatibility_rank}</span> {rankText(value.compatibility_rank)}
            </dd>
            <dt>Compatible</dt>
            <dd>{value.compatible ? 'yes' : 'no: the engine cannot run in it'}</dd>
            <dt>Allowed</dt>
            <dd>{value.allowed ? 'yes' : 'no: it matches no pattern of SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS'}</dd>
          </dl>
          <h2>Tools</h2>
          {value.tools.length === 0 ? (
            <p class="empty">None found in /usr/bin, /bin or /usr/local/bin.</p>
          ) : (
            <ul class="tools">
              {value.tools.map((tool) => (
                <li key={tool}>
                  <code>{tool}</code>
                </li>
              ))}
            </ul>
          )}
        </section>
      )}
    </Page>
  );
}
