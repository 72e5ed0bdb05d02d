// GET /health, GET /version, GET /claude/status, GET /secrets.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SystemStatus } from '../../core/system-status.js';
import { errorResponses, withExample } from '../schemas.js';
import type { VersionInfo } from '../../version.js';

const HealthSchema = Type.Object({
  status: Type.String({ description: 'ok, or degraded when a component is not ok' }),
  name: Type.String({ description: 'berth' }),
  version: Type.String({ description: '<major>.<minor>.<patch>-alpha' }),
  node: Type.Optional(Type.String({ description: 'The node that answered (SERVICE_NODE_NAME); several nodes may share one database behind a load balancer' })),
  components: Type.Array(
    Type.Object({
      name: Type.String({ description: 'container-runtime, engine-credentials-file, engine-credentials-secret, or node-lease (with SERVICE_DATABASE_URL: unavailable once this node lost its lease)' }),
      status: Type.String({ description: 'ok, unavailable or not_configured' }),
    }),
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
  app.get(
    '/health',
    {
      schema: {
        tags: ['system'],
        summary: 'Service health',
        security: [],
        description: 'Always 200; status degraded says that Podman or the engine credentials are not usable.',
        response: {
          200: withExample(HealthSchema, {
            status: 'ok',
            name: 'berth',
            version: '0.1.0-alpha',
            node: 'host-1-default',
            components: [
              { name: 'container-runtime', status: 'ok' },
              { name: 'engine-credentials-file', status: 'not_configured' },
              { name: 'engine-credentials-secret', status: 'ok' },
            ],
          }),
        },
      },
    },
    async () => deps.status.health(),
  );

  app.get(
    '/version',
    {
      schema: {
        tags: ['system'],
        summary: 'What is running: versions, images and commit',
        security: [],
        response: {
          200: withExample(VersionSchema, {
            version: '0.1.0-alpha',
            api_version: '1',
            engine_version: '2.1.330',
            engine_image: 'localhost/berth-engine:2.1.330',
            agent_image: 'localhost/berth-agent:0.1.0-alpha',
            commit: '4a09a5c',
          }),
        },
      },
    },
    async () => deps.version,
  );

  app.get(
    '/claude/status',
    {
      schema: {
        tags: ['system'],
        summary: 'Whether the engine has credentials (or the offline model)',
        response: {
          200: withExample(
            Type.Object({
              configured: Type.Boolean({ description: 'Whether runs can start: credentials, or the offline model, are set up' }),
              message: Type.String({ description: 'Where the credentials come from, or what to set' }),
            }),
            { configured: true, message: 'engine configured with Podman secret berth-engine-credentials' },
          ),
          ...errorResponses(401),
        },
      },
    },
    async () => deps.status.engineStatus(),
  );

  app.get(
    '/secrets',
    {
      schema: {
        tags: ['system'],
        summary: 'Names of the secrets a caller may use in container.secrets_env (never their values)',
        description: 'Secrets Berth keeps for itself (the engine credential, every name starting with berth-) are not listed: a run may not use them.',
        response: {
          200: withExample(Type.Object({ secrets: Type.Array(Type.String(), { description: 'Secret names, sorted' }) }), { secrets: ['gh-token', 'npm-token'] }),
          ...errorResponses(401, 503),
        },
      },
    },
    async () => ({ secrets: await deps.status.secretNames() }),
  );
}
