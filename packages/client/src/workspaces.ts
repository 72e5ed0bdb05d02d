// Workspaces: a caller's file trees on Berth that runs mount at their workdir. The resource (create, get,
// list, delete), its files one at a time (list a directory, upload, download, delete), whole trees as
// tar.gz both ways (archive, extract, and from/to a local directory in Node), and what changed (diff).
// The JSON routes go through the typed client; the file and archive routes are sent raw (a path of many
// segments, bodies that are not JSON). Bodies travel as streams both ways: an upload is read from its
// source as the connection takes it (transport.sendOnce, never cloned or retried), a download is handed
// over as the response's stream.

import { answer, type Api } from './api.js';
import { extractArchive, type ExtractedArchive } from './extract-archive.js';
import type { PackOptions, PackPlan } from './local-tree-types.js';
import { packDirectory, planDirectory } from './pack-directory.js';
import { uploadInit, type UploadBody } from './request-body.js';
import type {
  CallOptions,
  ExtractedUpload,
  UploadedFile,
  Workspace,
  WorkspaceCreateRequest,
  WorkspaceDiff,
  WorkspaceDiffSince,
  WorkspaceDirectory,
  WorkspaceList,
} from './types.js';

/** Sends one request to Berth: `replayable` false for a body that can be read once (see transport.ts). */
export type RawSend = (path: string, init: RequestInit & { duplex?: 'half' }, replayable: boolean) => Promise<Response>;

export interface WorkspacePathOptions extends CallOptions {
  /** A subdirectory of the workspace (relative, e.g. `src`); default its root. */
  path?: string;
}

export interface DownloadOptions extends CallOptions {
  /** Only these bytes (inclusive `end`, as HTTP's Range): Berth answers 206 with them. */
  range?: { start: number; end?: number };
}

export interface UploadDirectoryOptions extends WorkspacePathOptions, PackOptions {
  /** Told once the directory has been walked: what will be sent. */
  onPlan?: (plan: PackPlan) => void;
  /** Told as the archive goes out: compressed bytes sent so far. */
  onProgress?: (sentBytes: number) => void;
}

export class Workspaces {
  constructor(
    private readonly api: Api,
    private readonly send: RawSend,
  ) {}

  /** Creates a workspace: empty, or cloned from a git repository (`{ git: { url, ref?, secret? } }`). */
  async create(request: WorkspaceCreateRequest = {}, options: CallOptions = {}): Promise<Workspace> {
    return answer(await this.api.POST('/workspaces', { body: request, signal: options.signal }));
  }

  /** The caller's workspaces. */
  async list(options: CallOptions = {}): Promise<WorkspaceList> {
    return answer(await this.api.GET('/workspaces', { signal: options.signal }));
  }

  /** One workspace: size, file count, sessions using it (404 BerthError for another caller's). */
  async get(id: string, options: CallOptions = {}): Promise<Workspace> {
    return answer(await this.api.GET('/workspaces/{id}', { params: { path: { id } }, signal: options.signal }));
  }

  /** Deletes a workspace and its files (409 BerthError while a run or agent uses it). */
  async delete(id: string, options: CallOptions = {}): Promise<void> {
    await this.api.DELETE('/workspaces/{id}', { params: { path: { id } }, signal: options.signal });
  }

  /** A directory's entries (name, type, size, mode, mtime); `path` '' (the default) is the root. */
  async files(id: string, path = '', options: CallOptions = {}): Promise<WorkspaceDirectory> {
    const response = await this.send(filesPath(id, path), { method: 'GET', headers: { accept: 'application/json' }, signal: options.signal }, true);
    return json(response);
  }

  /**
   * Writes one file (parents created), replacing what was there. `body` is streamed when it is a stream
   * (a Node Readable, a web ReadableStream): the SDK never holds it whole.
   */
  async upload(id: string, path: string, body: UploadBody, options: CallOptions = {}): Promise<UploadedFile> {
    const { streamed, ...init } = uploadInit(body);
    const response = await this.send(filesPath(id, path), { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, ...init, signal: options.signal }, !streamed);
    return json(response);
  }

  /** A file's bytes as a stream (the whole file, or `range`). */
  async download(id: string, path: string, options: DownloadOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const headers: Record<string, string> = {};
    if (options.range) headers.range = `bytes=${options.range.start}-${options.range.end ?? ''}`;
    const response = await this.send(filesPath(id, path), { method: 'GET', headers, signal: options.signal }, true);
    return bodyOf(response);
  }

  /** Deletes a file, or a directory with everything in it. */
  async deleteFile(id: string, path: string, options: CallOptions = {}): Promise<void> {
    const response = await this.send(filesPath(id, path), { method: 'DELETE', signal: options.signal }, true);
    await discard(response);
  }

  /** The tree (or `path`'s subtree) as a tar.gz stream: symbolic links stored as links, owners as 0. */
  async archive(id: string, options: WorkspacePathOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const response = await this.send(`${workspacePath(id)}/archive${pathQuery(options.path)}`, { method: 'GET', signal: options.signal }, true);
    return bodyOf(response);
  }

  /**
   * Unpacks a tar or tar.gz into the workspace (at `path`). Berth checks every entry first and refuses the
   * whole archive (400 naming the entry) when one is unsafe; it then takes the `upload` checkpoint.
   */
  async extract(id: string, tarball: UploadBody, options: WorkspacePathOptions = {}): Promise<ExtractedUpload> {
    const { streamed, ...init } = uploadInit(tarball);
    const response = await this.send(
      `${workspacePath(id)}/archive${pathQuery(options.path)}`,
      { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, ...init, signal: options.signal },
      !streamed,
    );
    return json(response);
  }

  /** What changed since a checkpoint: the summary and the unified diff (binary files listed, not diffed). */
  async diff(id: string, options: CallOptions & { since?: WorkspaceDiffSince } = {}): Promise<WorkspaceDiff> {
    return answer(await this.api.GET('/workspaces/{id}/diff', { params: { path: { id }, query: { since: options.since ?? 'last_run' } }, signal: options.signal }));
  }

  /** The unified diff alone, as text (`Accept: text/x-diff`). */
  async diffText(id: string, options: CallOptions & { since?: WorkspaceDiffSince } = {}): Promise<string> {
    const response = await this.send(`${workspacePath(id)}/diff?since=${options.since ?? 'last_run'}`, { method: 'GET', headers: { accept: 'text/x-diff' }, signal: options.signal }, true);
    return response.text();
  }

  /**
   * Node only. Packs a local directory (honouring its .gitignore files, leaving `.git` out unless
   * `includeGit`; see pack-directory.ts) and extracts it into the workspace, streaming as it packs.
   */
  async uploadDirectory(id: string, dir: string, options: UploadDirectoryOptions = {}): Promise<ExtractedUpload & { plan: PackPlan }> {
    const plan = await planDirectory(dir, options);
    options.onPlan?.(plan);
    const archive = counted(packDirectory(plan), options.onProgress);
    const extracted = await this.extract(id, archive, { path: options.path, signal: options.signal });
    return { ...extracted, plan };
  }

  /**
   * Node only. Downloads the tree (or `path`'s subtree) and unpacks it into `dir`, which must not exist or
   * be empty; the archive is checked as hostile first (see extract-archive.ts).
   */
  async downloadDirectory(id: string, dir: string, options: WorkspacePathOptions = {}): Promise<ExtractedArchive> {
    return extractArchive(await this.archive(id, options), dir);
  }
}

/** A 2xx answer's JSON body, as the route's schema describes it. */
async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

function workspacePath(id: string): string {
  return `/workspaces/${encodeURIComponent(id)}`;
}

/** `/workspaces/{id}/files/a/b c` with each segment escaped; the root is `…/files/`. */
function filesPath(id: string, path: string): string {
  const segments = path.split('/').filter((segment) => segment !== '');
  return `${workspacePath(id)}/files/${segments.map(encodeURIComponent).join('/')}`;
}

function pathQuery(path: string | undefined): string {
  return path === undefined || path === '' ? '' : `?path=${encodeURIComponent(path)}`;
}

function bodyOf(response: Response): ReadableStream<Uint8Array> {
  if (response.body === null) return new ReadableStream({ start: (controller) => controller.close() });
  return response.body;
}

/** `source` passed through, telling `onProgress` the bytes read so far. */
async function* counted(source: AsyncIterable<Uint8Array>, onProgress?: (bytes: number) => void): AsyncGenerator<Uint8Array> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.byteLength;
    onProgress?.(total);
    yield chunk;
  }
}
