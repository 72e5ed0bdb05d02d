// GET /health, GET /version, GET /claude/status, GET /secrets.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SystemStatus } from '../../core/system-status.js';
import { errorResponses } from '../schemas.js';
import type { VersionInfo } from '../../version.js';

const HealthSchema = Type.Object({
  status: Type.String({ description: 'ok, or degraded when a component is not ok' }),
  name: Type.String(),
  version: Type.String({ description: '<major>.<minor>.<patch>-alpha' }),
  components: Type.Array(
    Type.Object({ name: Type.String(), status: Type.String({ description: 'ok, unavailable or not_configured' }) }),
  ),
});

const VersionSchema = Type.Object({
  version: Type.String({ description: 'Berth\'s version' }),
  api_version: Type.String({ description: 'Version of this HTTP interface; changes only with a change that breaks clients' }),
  engine_version: Type.String({ description: 'The pinned engine (Claude Code) version' }),
  engine_image: Type.String({ description: 'The engine image mounted at /opt/claude' }),
  agent_image: Type.String({ description: 'The default agent image' }),
  commit: Type.Optional(Type.String({ description: 'The git commit Berth runs from, when it runs from a checkout' })),
});

export function registerSystemRoutes(app: FastifyInstance, deps: { status: SystemStatus; version: VersionInfo }): void {
  app.get('/health', { schema: { tags: ['system'], summary: 'Service health', response: { 200: HealthSchema } } }, async () =>
    deps.status.health(),
  );

  app.get(
    '/version',
    { schema: { tags: ['system'], summary: 'What is running: versions, images and commit (open, like /health)', response: { 200: VersionSchema } } },
    async () => deps.version,
  );

  app.get(
    '/claude/status',
    {
      schema: {
        tags: ['system'],
        summary: 'Whether the engine has credentials (or the offline model)',
        response: { 200: Type.Object({ configured: Type.Boolean(), message: Type.String() }), ...errorResponses(401) },
      },
    },
    async () => deps.status.engineStatus(),
  );

  app.get(
    '/secrets',
    {
      schema: {
        tags: ['system'],
        summary: 'Names of the secrets in Podman\'s store (never their values)',
        response: { 200: Type.Object({ secrets: Type.Array(Type.String()) }), ...errorResponses(401, 503) },
      },
    },
    async () => ({ secrets: await deps.status.secretNames() }),
  );
}
