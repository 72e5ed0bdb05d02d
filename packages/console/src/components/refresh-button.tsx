// Reloads a page's resource; disabled while a load is under way, so one click is one request.
import type { Resource } from '../hooks/use-resource.js';

export function RefreshButton({ resource }: { resource: Pick<Resource<unknown>, 'reload' | 'loading'> }) {
  return (
    <button type="button" onClick={resource.reload} disabled={resource.loading}>
      Refresh
    </button>
  );
}
