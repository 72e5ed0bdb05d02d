// POST/GET /workspaces/:id/archive (a tar or tar.gz in, a tar.gz out) and GET /workspaces/:id/diff.
// Handlers decode, make the core call inside WorkspaceService.withFiles (owner-scoped: another caller's
// workspace is 404; an upload is a write: 409 while a run or agent holds the workspace) and answer.
import { finished } from 'node:stream/promises';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../errors.js';
import { requestCaller } from '../caller.js';
import { errorResponses, withExample } from '../schemas.js';
import type { WorkspaceService } from '../../core/workspaces/workspace-service.js';
import { parseWorkspacePath } from '../../core/workspaces/workspace-paths.js';
import { extractArchive } from '../../core/workspaces/archive-extract.js';
import { packWorkspace } from '../../core/workspaces/archive-pack.js';
import { DEFAULT_MAX_DIFF_BYTES, diffWorkspace } from '../../core/workspaces/workspace-diff.js';

export interface WorkspaceArchiveSettings {
  readonly maxArchiveRatio: number;
  readonly diffMaxFileBytes: number;
  /** Cap on one diff answer's text (8 MiB by default). */
  readonly maxDiffBytes?: number;
}

const IdParamsSchema = Type.Object({ id: Type.String({ description: 'Workspace id (a UUID)' }) });
const PathQuerySchema = Type.Object(
  { path: Type.Optional(Type.String({ description: 'A directory relative to the workspace root; the root when absent' })) },
  { additionalProperties: false },
);
const DiffQuerySchema = Type.Object(
  {
    since: Type.Optional(
      Type.Union([Type.Literal('last_run'), Type.Literal('upload')], {
        default: 'last_run',
        description: 'last_run: the tree as it was when the last run or agent began; upload: after the last archive upload or git clone',
      }),
    ),
  },
  { additionalProperties: false },
);

const ExtractedSchema = Type.Object({
  files: Type.Integer({ description: 'Regular files written' }),
  bytes: Type.Integer({ description: 'Their bytes' }),
});

const DiffSchema = Type.Object(
  {
    since: Type.Union([Type.Literal('last_run'), Type.Literal('upload')]),
    checkpoint_at: Type.String({ format: 'date-time', description: 'When the checkpoint compared with was taken' }),
    added: Type.Array(Type.String(), { description: 'Files, links and other non-directories new since the checkpoint' }),
    changed: Type.Array(Type.String(), { description: 'Entries whose content, kind, mode or link target changed' }),
    removed: Type.Array(Type.String()),
    binary: Type.Array(Type.String(), { description: 'Of the above, files that are not text (a NUL byte or not UTF-8): listed, not diffed' }),
    too_large: Type.Array(Type.String(), { description: 'Of the above, files over SERVICE_WORKSPACE_DIFF_MAX_FILE_BYTES (or a change too large to compute): listed, not diffed' }),
    diff: Type.String({ description: 'Unified diff of the text files (git-style a/ b/ names)' }),
    truncated: Type.Boolean({ description: 'Whether `diff` was cut at 8 MiB (the lists are complete)' }),
  },
  { description: 'With `Accept: text/x-diff` (or text/plain) the answer is the unified diff alone, as text.' },
);

const EXAMPLE_DIFF = {
  since: 'last_run',
  checkpoint_at: '2026-11-26T08:05:12.000Z',
  added: ['tests/test_parse.py'],
  changed: ['src/parse.py'],
  removed: [],
  binary: [],
  too_large: [],
  diff: 'diff --git a/src/parse.py b/src/parse.py\n--- a/src/parse.py\n+++ b/src/parse.py\n@@ -1,2 +1,2 @@\n def parse(s):\n-    return s.split(",")\n+    return [p.strip() for p in s.split(",")]\n',
  truncated: false,
};

const notFound = errors.workspaceNotFound('<id>');
const unavailable = errors.runtimeUnavailable('workspaces need a rootful Berth (each workspace is a loop-mounted file system of its own)');
const noCheckpoint = (since: string) =>
  errors.invalid(
    `since: this workspace has no "${since}" checkpoint yet (last_run is taken when a run or agent starts with the workspace, upload after an archive upload or a git clone)`,
  );

/** Whether the client asked for the diff text alone. */
function wantsText(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const types = accept.split(',').map((part) => part.split(';')[0]?.trim().toLowerCase());
  const text = types.findIndex((type) => type === 'text/x-diff' || type === 'text/plain');
  const json = types.findIndex((type) => type === 'application/json');
  return text !== -1 && (json === -1 || text < json);
}

export function registerWorkspaceArchiveRoutes(app: FastifyInstance, deps: { workspaces: WorkspaceService; settings: WorkspaceArchiveSettings }): void {
  const { workspaces, settings } = deps;

  // The upload takes a raw body of any type as a stream, in a scope of its own (JSON stays JSON elsewhere).
  app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    raw.post<{ Params: Static<typeof IdParamsSchema>; Querystring: Static<typeof PathQuerySchema> }>(
      '/workspaces/:id/archive',
      {
        // The workspace's own size is the limit (SERVICE_WORKSPACE_MAX_BYTES).
        bodyLimit: Number.MAX_SAFE_INTEGER,
        schema: {
          tags: ['workspaces'],
          summary: 'Extract a tar or tar.gz (the raw request body) into the workspace',
          description:
            'gzip is detected by its magic bytes. Every entry is checked before anything is written; an archive with an absolute path, a `..` segment, a symbolic link leaving the workspace, a hard link, a device, a FIFO, a setuid/setgid bit, more entries than SERVICE_WORKSPACE_MAX_FILES, or that unpacks past SERVICE_WORKSPACE_MAX_ARCHIVE_RATIO times its size is refused whole (400 naming the entry). Files are owned by the workspace\'s file owner with modes 0644/0755; a file of the same path is replaced, a directory merged. Then the `upload` checkpoint is taken (GET …/diff?since=upload).',
          params: IdParamsSchema,
          querystring: PathQuerySchema,
          response: {
            200: withExample(ExtractedSchema, { files: 37, bytes: 48213 }),
            ...errorResponses(400, 401, notFound, errors.workspaceBusy('<id>'), errors.workspaceFull('<id>', '<what>'), 429, unavailable),
          },
        },
      },
      async (request, reply) => {
        try {
          const path = parseWorkspacePath(request.query.path ?? '', { field: 'path', allowRoot: true });
          const declared = Number(request.headers['content-length']);
          return await workspaces.withFiles(requestCaller(request).owner, request.params.id, 'write', async (ws) => {
            const extracted = await extractArchive(ws, path, request.raw, {
              maxArchiveRatio: settings.maxArchiveRatio,
              ...(Number.isSafeInteger(declared) ? { contentLength: declared } : {}),
            });
            await workspaces.checkpointUpload(ws);
            return extracted;
          });
        } catch (error) {
          // Refused before the body was read whole (404, 409, a full disk): close the connection rather than read the rest.
          if (!request.raw.readableEnded) reply.header('connection', 'close');
          throw error;
        }
      },
    );
  });

  app.get<{ Params: Static<typeof IdParamsSchema>; Querystring: Static<typeof PathQuerySchema> }>(
    '/workspaces/:id/archive',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'Download the workspace (or a directory of it) as a tar.gz',
        description:
          'Streamed as it is read. Entries are named relative to `path`, record uid/gid 0 without user names and permission bits only; symbolic links are stored as links (never followed); FIFOs, sockets and devices are left out.',
        params: IdParamsSchema,
        querystring: PathQuerySchema,
        response: { ...errorResponses(400, 401, notFound, errors.notFound('file <path>'), 429, unavailable) },
      },
    },
    async (request, reply) => {
      const path = parseWorkspacePath(request.query.path ?? '', { field: 'path', allowRoot: true });
      return workspaces.withFiles(requestCaller(request).owner, request.params.id, 'read', async (ws) => {
        const archive = await packWorkspace(ws, path);
        const name = path.segments.at(-1) ?? ws.id;
        reply.type('application/gzip').header('content-disposition', `attachment; filename="${name.replace(/[^A-Za-z0-9._-]/g, '_')}.tar.gz"`);
        reply.send(archive);
        // The disk stays mounted until the archive has been sent (or the client went away).
        await finished(archive).catch(() => undefined);
        return reply;
      });
    },
  );

  app.get<{ Params: Static<typeof IdParamsSchema>; Querystring: Static<typeof DiffQuerySchema> }>(
    '/workspaces/:id/diff',
    {
      schema: {
        tags: ['workspaces'],
        summary: 'What changed since a checkpoint: a summary and a unified diff',
        params: IdParamsSchema,
        querystring: DiffQuerySchema,
        response: {
          200: withExample(DiffSchema, EXAMPLE_DIFF),
          ...errorResponses(400, noCheckpoint('<since>'), 401, notFound, 429, unavailable),
        },
      },
    },
    async (request, reply) => {
      const since = request.query.since ?? 'last_run';
      const diff = await workspaces.withFiles(requestCaller(request).owner, request.params.id, 'read', (ws) =>
        diffWorkspace(ws, since, { diffMaxFileBytes: settings.diffMaxFileBytes, maxDiffBytes: settings.maxDiffBytes ?? DEFAULT_MAX_DIFF_BYTES }),
      );
      if (diff === undefined) throw noCheckpoint(since);
      if (wantsText(request.headers.accept)) return reply.type('text/x-diff; charset=utf-8').send(diff.diff);
      return diff;
    },
  );
}
