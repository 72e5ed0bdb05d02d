// A workspace's files, read-only: a directory's entries (folders first), a text file opened below the
// listing, and downloads of a file or of the directory's whole tree as tar.gz. Where it is lives in the
// address (`?path=` the directory, `&file=` the open file), so a view can be bookmarked and Back works,
// on the workspace page and on a session page alike. Names come from what runs wrote: Preact renders them
// as text, never as markup, and links are never followed (Berth lists them as `symlink`).
import type { WorkspaceEntry } from '@berth/client';
import { useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { formatBytes } from '../format.js';
import { useResource } from '../hooks/use-resource.js';
import { navigate, useLocation } from '../router.js';
import { baseName, saveStream } from '../workspaces/save-download.js';
import { preview, PREVIEW_BYTES, type Preview } from '../workspaces/text-preview.js';
import { ErrorMessage } from './error-message.js';
import { Time } from './time.js';

const TYPE_ORDER: Record<WorkspaceEntry['type'], number> = { directory: 0, file: 1, symlink: 2, other: 3 };

function join(directory: string, name: string): string {
  return directory === '' ? name : `${directory}/${name}`;
}

export function FileBrowser({ workspaceId }: { workspaceId: string }) {
  const berth = useBerth();
  const location = useLocation();
  const directory = location.query.get('path') ?? '';
  const file = location.query.get('file') ?? '';
  const listing = useResource((signal) => berth.workspaces.files(workspaceId, directory, { signal }), [berth, workspaceId, directory]);
  const [downloadError, setDownloadError] = useState<unknown>();
  const [downloading, setDownloading] = useState(false);

  const go = (next: { path?: string; file?: string }) => {
    const query = new URLSearchParams();
    if (next.path) query.set('path', next.path);
    if (next.file) query.set('file', next.file);
    const search = query.toString();
    navigate(`${location.path}${search ? `?${search}` : ''}`);
  };

  const download = async (what: () => Promise<ReadableStream<Uint8Array>>, name: string, type?: string) => {
    setDownloading(true);
    setDownloadError(undefined);
    try {
      await saveStream(await what(), name, type);
    } catch (error) {
      setDownloadError(error);
    } finally {
      setDownloading(false);
    }
  };

  const entries = [...(listing.value?.entries ?? [])].sort((a, b) => TYPE_ORDER[a.type] - TYPE_ORDER[b.type] || a.name.localeCompare(b.name));
  const crumbs = directory.split('/').filter((segment) => segment !== '');
  const archiveName = `${baseName(directory, `workspace-${workspaceId.slice(0, 8)}`)}.tar.gz`;

  return (
    <section class="card file-browser" aria-labelledby="files-heading">
      <div class="section-head">
        <h2 id="files-heading">Files</h2>
        <button type="button" disabled={downloading} onClick={() => void download(() => berth.workspaces.archive(workspaceId, { path: directory }), archiveName, 'application/gzip')}>
          Download {directory === '' ? 'all' : 'this folder'} (tar.gz)
        </button>
      </div>
      <nav aria-label="Folder" class="crumbs">
        <a href="#" onClick={(event) => (event.preventDefault(), go({}))}>
          workspace
        </a>
        {crumbs.map((segment, i) => (
          <span key={i}>
            {' / '}
            <a href="#" onClick={(event) => (event.preventDefault(), go({ path: crumbs.slice(0, i + 1).join('/') }))}>
              {segment}
            </a>
          </span>
        ))}
      </nav>
      <ErrorMessage error={listing.error} context="The folder could not be read" />
      <ErrorMessage error={downloadError} context="The download failed" />
      {listing.value && entries.length === 0 && <p class="empty">This folder is empty.</p>}
      {entries.length > 0 && (
        <table>
          <caption class="visually-hidden">Entries of {directory === '' ? 'the workspace root' : directory}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Size</th>
              <th scope="col">Mode</th>
              <th scope="col">Modified</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {entries.map((entry) => {
              const path = join(directory, entry.name);
              return (
                <tr key={entry.name} data-type={entry.type}>
                  <td>
                    {entry.type === 'directory' ? (
                      <a href="#" onClick={(event) => (event.preventDefault(), go({ path }))}>
                        {entry.name}/
                      </a>
                    ) : entry.type === 'file' ? (
                      <a href="#" aria-current={file === path ? 'true' : undefined} onClick={(event) => (event.preventDefault(), go({ path: directory, file: path }))}>
                        {entry.name}
                      </a>
                    ) : (
                      <span title={entry.type === 'symlink' ? 'a symbolic link: not followed' : 'not a regular file'}>
                        {entry.name} <span class="help">({entry.type})</span>
                      </span>
                    )}
                  </td>
                  <td>{entry.type === 'file' ? formatBytes(entry.size) : ''}</td>
                  <td>
                    <code>{entry.mode.toString(8).padStart(3, '0')}</code>
                  </td>
                  <td>
                    <Time iso={entry.mtime} />
                  </td>
                  <td>
                    {entry.type === 'file' && (
                      <button type="button" disabled={downloading} aria-label={`Download ${entry.name}`} onClick={() => void download(() => berth.workspaces.download(workspaceId, path), entry.name)}>
                        Download
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {file !== '' && <FileView key={file} workspaceId={workspaceId} path={file} onDownload={() => void download(() => berth.workspaces.download(workspaceId, file), baseName(file, 'file'))} />}
    </section>
  );
}

function FileView({ workspaceId, path, onDownload }: { workspaceId: string; path: string; onDownload: () => void }) {
  const berth = useBerth();
  const shown = useResource<Preview>(
    async (signal) => {
      // One byte more than is shown tells whether the file goes on.
      const stream = await berth.workspaces.download(workspaceId, path, { range: { start: 0, end: PREVIEW_BYTES }, signal });
      return preview(new Uint8Array(await new Response(stream).arrayBuffer()));
    },
    [berth, workspaceId, path],
  );
  return (
    <section class="file-view" aria-label={`File ${path}`}>
      <div class="section-head">
        <h3>
          <code>{path}</code>
        </h3>
        <button type="button" onClick={onDownload}>
          Download file
        </button>
      </div>
      <ErrorMessage error={shown.error} context="The file could not be read" />
      {shown.value?.kind === 'binary' && <p class="empty">A binary file: download it to open it.</p>}
      {shown.value?.kind === 'text' && (
        <>
          <pre class="output file-text" data-testid="file-text">
            {shown.value.text}
          </pre>
          {shown.value.truncated && <p class="help">Showing the first {formatBytes(PREVIEW_BYTES)}; download the file for the rest.</p>}
        </>
      )}
    </section>
  );
}
