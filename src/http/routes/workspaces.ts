// POST/GET /workspaces, GET/DELETE /workspaces/:id and the files API (PUT/GET/DELETE /workspaces/:id/files/*).
// Handlers decode, make one service call and answer; the checks live in core/workspaces. Uploads are raw
// bodies streamed to the workspace's disk: the file routes take any content type without buffering it, and
// their only size limit is the workspace's own (SERVICE_WORKSPACE_MAX_BYTES).
import { finished } from 'node:stream/promises';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../../errors.js';
import { requestCaller } from '../caller.js';
import { errorResponses, withExample } from '../schemas.js';
import type { WorkspaceService } from '../../core/workspaces/workspace-service.js';
import type { OpenWorkspace } from '../../core/workspaces/open-workspace.js';
import { parseWorkspacePath } from '../../core/workspaces/workspace-paths.js';
import { deleteEntry, readEntry, writeFile } from '../../core/workspaces/workspace-files.js';
import { parseRange } from '../byte-range.js';

/** What POST /workspaces hands a `git` request to (core/workspaces/git-clone.ts); optional. */
export interface WorkspaceCloner {
  /** Checks that need no workspace (400s): before the workspace is made. */
  check?(git: GitBody): Promise<unknown>;
  /** Clones into the empty tree; the route removes the workspace when it fails. */
  clone(owner: string, ws: OpenWorkspace, git: GitBody): Promise<void>;
}

const EXAMPLE_WORKSPACE_ID = '5b2e7c1a-3d4f-4e8a-9c6b-1f0a2d3e4c5b';

const GitSchema = Type.Object(
  {
    url: Type.String({ minLength: 1, description: 'Repository URL: https, http, git or ssh (ext::, file:// and the like are refused)' }),
    ref: Type.Optional(Type.String({ minLength: 1, description: 'Branch or tag to check out (a shallow clone of it); default the remote\'s HEAD' })),
    secret: Type.Optional(Type.String({ minLength: 1, description: 'Name of a Podman secret holding the credential (a token or password); git reads it, Berth never logs or shows it' })),
  },
  { additionalProperties: false },
);
type GitBody = Static<typeof GitSchema>;

const CreateSchema = Type.Object(
  { git: Type.Optional(GitSchema) },
  { additionalProperties: false, description: 'Empty for an empty workspace; `git` to clone a repository into it' },
);

const WorkspaceSchema = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Workspace id' }),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.String({ format: 'date-time', description: 'Last file operation, run or link; the workspace is removed SERVICE_WORKSPACE_TTL later' }),
  size_bytes: Type.Integer({ description: 'Bytes of the files in the tree, as measured after its last change' }),
  max_bytes: Type.Integer({ description: 'Size of the workspace\'s file system (SERVICE_WORKSPACE_MAX_BYTES)' }),
  file_count: Type.Integer({ description: 'Files, directories and links in the tree, as measured after its last change' }),
  max_files: Type.Integer({ description: 'SERVICE_WORKSPACE_MAX_FILES' }),
  sessions: Type.Array(Type.String({ format: 'uuid' }), { description: 'Sessions whose runs use this workspace' }),
  owner_session: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], { description: 'The session whose own workspace this is (removed with it); null for one made with POST /workspaces' }),
  in_use: Type.Boolean({ description: 'Whether a run or agent holds it now' }),
  source: Type.Union([Type.Literal('empty'), Type.Literal('upload'), Type.Literal('git'), Type.Literal('fork'), Type.Literal('session')], {
    description: 'empty, upload or git (POST /workspaces), fork (a forked session\'s copy), session (a session\'s own)',
  }),
});

const EXAMPLE_WORKSPACE = {
  id: EXAMPLE_WORKSPACE_ID,
  created_at: '2026-11-26T08:00:00.000Z',
  last_used_at: '2026-11-26T08:05:12.000Z',
  size_bytes: 48213,
  max_bytes: 2147483648,
  file_count: 37,
  max_files: 100000,
  sessions: [],
  owner_session: null,
  in_use: false,
  source: 'empty',
};

const IdParamsSchema = Type.Object({ id: Type.String({ description: 'Workspace id (a UUID); any other value names no workspace: 404' }) });
const FileParamsSchema = Type.Object({
  id: Type.String({ description: 'Workspace id (a UUID)' }),
  '*': Type.String({ description: 'Path relative to the workspace root (URL-encoded segments; no `.`, `..`, empty segments or NUL)' }),
});

const EntrySchema = Type.Object({
  name: Type.String(),
  type: Type.Union([Type.Literal('file'), Type.Literal('directory'), Type.Literal('symlink'), Type.Literal('other')]),
  size: Type.Integer({ description: 'Bytes (files and links; 0 for directories)' }),
  mode: Type.Integer({ description: 'Permission bits (mode & 0o777)' }),
  mtime: Type.String({ format: 'date-time' }),
});
const ListingSchema = Type.Object(
  { path: Type.String({ description: 'The directory listed, relative to the root (\'\' for the root)' }), entries: Type.Array(EntrySchema) },
  { description: 'A directory: its entries (links are listed, never followed). A file answers its bytes instead (application/octet-stream, `Range` supported: 206, or 416 when unsatisfiable).' },
);
const UploadedSchema = Type.Object({ path: Type.String(), size: Type.Integer({ description: 'Bytes written' }) });

const notFound = errors.workspaceNotFound('<id>');
const unavailable = errors.runtimeUnavailable('workspaces need a rootful Berth (each workspace is a loop-mounted file system of its own)');

export function registerWorkspaceRoutes(app: FastifyInstance, deps: { workspaces: WorkspaceService; cloner?: WorkspaceCloner }): void {
  const { workspaces } = deps;

  app.post<{ Body: Static<typeof CreateSchema> | undefined }>(
    '/workspaces',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'Create a workspace: empty, or a git clone',
        body: withExample(CreateSchema, {}),
        response: {
          201: withExample(WorkspaceSchema, EXAMPLE_WORKSPACE),
          ...errorResponses(400, 401, errors.workspacesPerCaller('<limit>'), errors.workspaceCloneFailed('<git\'s last line>'), unavailable),
        },
      },
    },
    async (request, reply) => {
      const { owner } = requestCaller(request);
      const git = request.body?.git;
      workspaces.requireAvailable();
      if (git !== undefined && deps.cloner === undefined) throw errors.invalid('git: git clones are not configured on this Berth');
      if (git !== undefined) await deps.cloner!.check?.(git);
      const record = await workspaces.create(owner, { source: git === undefined ? 'empty' : 'git' });
      if (git !== undefined) {
        try {
          await workspaces.withFiles(owner, record.id, 'write', (ws) => deps.cloner!.clone(owner, ws, git));
        } catch (error) {
          await workspaces.delete(owner, record.id).catch(() => undefined);
          throw error;
        }
      }
      return reply.code(201).send(await workspaces.get(owner, record.id));
    },
  );

  app.get(
    '/workspaces',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'The caller\'s workspaces, newest first',
        response: { 200: withExample(Type.Object({ workspaces: Type.Array(WorkspaceSchema) }), { workspaces: [EXAMPLE_WORKSPACE] }), ...errorResponses(401, 429, unavailable) },
      },
    },
    async (request) => ({ workspaces: await workspaces.list(requestCaller(request).owner) }),
  );

  app.get<{ Params: Static<typeof IdParamsSchema> }>(
    '/workspaces/:id',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'One workspace: size, file count, sessions using it',
        params: IdParamsSchema,
        response: { 200: withExample(WorkspaceSchema, EXAMPLE_WORKSPACE), ...errorResponses(401, notFound, 429, unavailable) },
      },
    },
    async (request) => workspaces.get(requestCaller(request).owner, request.params.id),
  );

  app.delete<{ Params: Static<typeof IdParamsSchema> }>(
    '/workspaces/:id',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'Delete a workspace and its files (409 while a run or agent uses it)',
        params: IdParamsSchema,
        response: {
          200: withExample(Type.Object({ success: Type.Literal(true), workspace_id: Type.String({ format: 'uuid' }) }), { success: true, workspace_id: EXAMPLE_WORKSPACE_ID }),
          ...errorResponses(401, notFound, errors.workspaceBusy('<id>'), 429, unavailable),
        },
      },
    },
    async (request) => {
      await workspaces.delete(requestCaller(request).owner, request.params.id);
      return { success: true as const, workspace_id: request.params.id };
    },
  );

  // The file routes take raw bodies of any type as a stream, in a scope of their own (JSON stays JSON elsewhere).
  app.register(async (files) => {
    files.removeAllContentTypeParsers();
    files.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    const getSchema = (summary: string) => ({
      tags: ['workspaces'],
      summary,
      params: FileParamsSchema,
      response: {
        200: withExample(ListingSchema, { path: 'src', entries: [{ name: 'main.py', type: 'file', size: 812, mode: 0o644, mtime: '2026-11-26T08:05:12.000Z' }] }),
        ...errorResponses(400, 401, notFound, errors.notFound('file <path>'), errors.rangeNotSatisfiable('<size>'), 429, unavailable),
      },
    });
    const read = async (request: FastifyRequest<{ Params: { id: string; '*'?: string } }>, reply: FastifyReply) => {
      const path = parseWorkspacePath(request.params['*'] ?? '', { allowRoot: true });
      return workspaces.withFiles(requestCaller(request).owner, request.params.id, 'read', async (ws) => {
        const entry = await readEntry(ws, path);
        if (entry.kind === 'directory') return { path: entry.path, entries: entry.entries };
        const range = parseRange(request.headers.range, entry.size);
        reply.header('accept-ranges', 'bytes').header('last-modified', entry.mtime.toUTCString()).type('application/octet-stream');
        if (range === 'unsatisfiable') {
          await entry.close();
          reply.header('content-range', `bytes */${entry.size}`);
          throw errors.rangeNotSatisfiable(entry.size);
        }
        if (range === undefined && entry.size === 0) {
          await entry.close();
          return reply.header('content-length', 0).send(Buffer.alloc(0));
        }
        if (range === undefined) reply.header('content-length', entry.size);
        else reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${entry.size}`).header('content-length', range.end - range.start + 1);
        const stream = entry.open(range);
        reply.send(stream);
        // The disk stays mounted for this reader until its stream has ended (or the client went away).
        await finished(stream).catch(() => undefined);
        return reply;
      });
    };
    files.get('/workspaces/:id/files', { schema: { ...getSchema('List the workspace\'s root directory'), params: IdParamsSchema } }, read);
    files.get('/workspaces/:id/files/*', { schema: getSchema('Download a file (bytes, with Range) or list a directory (JSON)') }, read);

    files.put<{ Params: Static<typeof FileParamsSchema> }>(
      '/workspaces/:id/files/*',
      {
        bodyLimit: Number.MAX_SAFE_INTEGER,
        schema: {
          tags: ['workspaces'],
          summary: 'Upload one file as the raw request body (streamed; parents created; replaces a file)',
          params: FileParamsSchema,
          response: {
            201: withExample(UploadedSchema, { path: 'src/main.py', size: 812 }),
            ...errorResponses(400, 401, notFound, errors.workspaceBusy('<id>'), errors.workspaceFull('<id>', '<what>'), 429, unavailable),
          },
        },
      },
      async (request, reply) => {
        const path = parseWorkspacePath(request.params['*']);
        const declared = request.headers['content-length'];
        const length = declared === undefined ? undefined : Number(declared);
        try {
          const written = await workspaces.withFiles(requestCaller(request).owner, request.params.id, 'write', (ws) =>
            writeFile(ws, path, request.raw, Number.isSafeInteger(length) ? length : undefined),
          );
          return await reply.code(201).send({ path: path.text, size: written.size });
        } catch (error) {
          // Refused before the body was read (or while it was): the connection closes instead of reading the rest.
          if (!request.raw.readableEnded) reply.header('connection', 'close');
          throw error;
        }
      },
    );

    files.delete<{ Params: Static<typeof FileParamsSchema> }>(
      '/workspaces/:id/files/*',
      {
        schema: {
          tags: ['workspaces'],
          summary: 'Delete a file, a link, or a directory with everything in it',
          params: FileParamsSchema,
          response: {
            200: withExample(Type.Object({ success: Type.Literal(true), path: Type.String() }), { success: true, path: 'build/out.log' }),
            ...errorResponses(400, 401, notFound, errors.notFound('file <path>'), errors.workspaceBusy('<id>'), 429, unavailable),
          },
        },
      },
      async (request) => {
        const path = parseWorkspacePath(request.params['*']);
        await workspaces.withFiles(requestCaller(request).owner, request.params.id, 'write', (ws) => deleteEntry(ws, path));
        return { success: true as const, path: path.text };
      },
    );
  });
}
