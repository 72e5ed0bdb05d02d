// Local images, best compatibility rank first: which ones runs and agents can use.
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { formatBytes } from '../format.js';
import { useResource } from '../hooks/use-resource.js';
import { imageReference, rankText } from '../images.js';
import { Link } from '../router.js';
import { RefreshButton } from '../components/refresh-button.js';

export function ImagesPage() {
  const berth = useBerth();
  const images = useResource((signal) => berth.images.list({ signal }), [berth]);
  const list = images.value?.images ?? [];
  return (
    <Page
      title="Images"
      actions={
        <RefreshButton resource={images} />
      }
    >
      <ErrorMessage error={images.error} context="Images could not be read" />
      {images.value && list.length === 0 && <p class="empty">No local images.</p>}
      {list.length > 0 && (
        <section class="card">
          <table>
            <caption class="visually-hidden">Local images, best compatibility rank first</caption>
            <thead>
              <tr>
                <th scope="col">Image</th>
                <th scope="col">Rank</th>
                <th scope="col">Usable</th>
                <th scope="col">Size</th>
              </tr>
            </thead>
            <tbody>
              {list.map((image) => {
                const reference = imageReference(image);
                return (
                  <tr key={`${image.id}-${reference}`}>
                    <td>
                      <Link href={`/images/detail?name=${encodeURIComponent(reference)}`}>
                        <code>{reference}</code>
                      </Link>
                    </td>
                    <td>
                      <span class={`rank rank-${image.compatibility_rank}`}>{image.compatibility_rank}</span> {rankText(image.compatibility_rank)}
                    </td>
                    <td>{!image.compatible ? 'no: incompatible' : !image.allowed ? 'no: not allowed here' : 'yes'}</td>
                    <td>{formatBytes(image.size)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </section>
      )}
    </Page>
  );
}
