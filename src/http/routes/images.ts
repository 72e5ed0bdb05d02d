// GET /images, GET /images/search, GET /images/:name (also /images/<name with slashes>), POST /images/pull
// (a JSON answer once the image is there, or its progress as Server-Sent Events when the client asks for them).
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ImageCatalog } from '../../core/images/image-catalog.js';
import { SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX } from '../../core/images/image-catalog.js';
import { SEARCH_TERM_MAX_LENGTH } from '../../core/images/image-requests.js';
import { IMAGE_REFERENCE_MAX_LENGTH } from '../../core/validation/images.js';
import { errors } from '../../errors.js';
import { errorResponses, withExample } from '../schemas.js';
import { acceptsEventStream, streamEvents, type SseOptions } from '../sse.js';

const EXAMPLE_IMAGE = {
  repository: 'localhost/berth-agent',
  tag: '0.1.0-alpha',
  id: '5d0da3dc9764',
  size: 164_093_952,
  compatibility_rank: 1,
  compatible: true,
  tools: ['bash', 'git', 'python3'],
  allowed: true,
};

const ImageSchema = Type.Object({
  repository: Type.String({ description: 'Fully qualified, e.g. localhost/berth-agent or docker.io/library/python' }),
  tag: Type.String({ description: 'Empty when the image was named by digest only' }),
  id: Type.String({ description: 'Image id' }),
  size: Type.Integer({ description: 'Bytes, as Podman lists it' }),
  compatibility_rank: Type.Integer({
    minimum: 1,
    maximum: 4,
    description: '1 official agent image, 2 verified compatible (glibc, bash and git), 3 standard glibc, 4 incompatible (Alpine/musl or no C library)',
  }),
  compatible: Type.Boolean({ description: 'False for rank 4: the engine cannot run in it' }),
  tools: Type.Array(Type.String(), { description: 'Tools found in /usr/bin, /bin or /usr/local/bin' }),
  allowed: Type.Boolean({ description: 'Whether SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS lets runs and pulls use it' }),
});

const SearchQuerySchema = Type.Object({
  q: Type.String({ minLength: 1, maxLength: SEARCH_TERM_MAX_LENGTH, description: 'Search term; `host:port/term` searches that registry only' }),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: SEARCH_LIMIT_MAX, default: SEARCH_LIMIT_DEFAULT, description: `Results; default ${SEARCH_LIMIT_DEFAULT}, at most ${SEARCH_LIMIT_MAX}` })),
});

const SearchResultSchema = Type.Object({
  name: Type.String({ description: 'Reference to pull, with its registry' }),
  description: Type.String(),
  stars: Type.Integer(),
  official: Type.Boolean(),
});

const NameParamsSchema = Type.Object({
  name: Type.String({ description: 'Image reference such as localhost/berth-agent:0.1.0-alpha; encode "/" as %2F, or use the unencoded form /images/<reference>' }),
});

const WildcardParamsSchema = Type.Object({ '*': Type.String() });

const PullBodySchema = Type.Object(
  {
    image: Type.String({ minLength: 1, maxLength: IMAGE_REFERENCE_MAX_LENGTH, description: 'Reference to pull; must match SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS' }),
    quiet: Type.Optional(Type.Boolean({ description: 'Suppress Podman\'s progress output: the JSON answer is the same, a streamed pull has no progress frames' })),
    platform: Type.Optional(Type.String({ maxLength: 64, description: 'os/arch[/variant], e.g. linux/amd64; default the host\'s' })),
  },
  { additionalProperties: false },
);

const PullResponseSchema = Type.Object({
  success: Type.Literal(true),
  image_id: Type.String({ description: 'Image id' }),
  image: Type.String({ description: 'The fully qualified reference that was pulled' }),
});

const PullHeadersSchema = Type.Object({
  accept: Type.Optional(
    Type.String({ description: '`text/event-stream` for the pull\'s progress as Server-Sent Events; otherwise the JSON answer once the image is there' }),
  ),
});

const PULL_DESCRIPTION = [
  'By default Berth answers once Podman has the image.',
  'With `Accept: text/event-stream` it answers at once with Server-Sent Events instead: refusals (400 invalid or not allowed, 401, 429, 503 with SERVICE_SSE_MAX_STREAMS streams open) are still ordinary JSON errors, sent before the stream opens; then frames are `data: <JSON>` lines:',
  '{"type":"progress","message":"Copying blob sha256:...","blobs_started":1} for each line Podman reports (`blobs_started`: layers whose copy has started; `blobs_done`: layers copied, present once every layer is, since Podman reports neither a layer\'s end nor how many there are);',
  '{"type":"done","success":true,"image_id":"...","image":"..."} with the fields of the JSON answer when the image is there;',
  '{"type":"error","error":"...","status":502} when the pull failed, with the text and status the JSON answer would have had (404 for an image the registry does not have, 502 for a registry failure, 503 when Podman cannot be reached).',
  'Comment lines `: ping` are heartbeats. `quiet` suppresses the progress frames.',
  'A client that disconnects stops the pull: Berth closes its request to Podman, which cancels the pull.',
].join(' ');

export interface ImageRouteDependencies {
  readonly images: ImageCatalog;
  /** Heartbeats, the per-client buffer limit and the server-wide stream limit (http/sse.ts), for streamed pulls. */
  readonly sse: SseOptions;
}

export function registerImageRoutes(app: FastifyInstance, deps: ImageRouteDependencies): void {
  const pullStream: SseOptions = { ...deps.sse, errorFrame: (error, status) => ({ type: 'error', error, status }) };

  app.get(
    '/images',
    {
      schema: {
        tags: ['images'],
        summary: 'Local images, best compatibility rank first, then by repository:tag',
        response: { 200: withExample(Type.Object({ images: Type.Array(ImageSchema) }), { images: [EXAMPLE_IMAGE] }), ...errorResponses(401, 429, 503) },
      },
    },
    async () => ({ images: await deps.images.list() }),
  );

  app.get<{ Querystring: Static<typeof SearchQuerySchema> }>(
    '/images/search',
    {
      schema: {
        tags: ['images'],
        summary: 'Search registries for images',
        querystring: SearchQuerySchema,
        response: {
          200: withExample(Type.Object({ results: Type.Array(SearchResultSchema) }), {
            results: [{ name: 'docker.io/library/python', description: 'Python is an interpreted, interactive, object-oriented, open-source programming language.', stars: 10000, official: true }],
          }),
          ...errorResponses(400, 401, 429, errors.imageSearchFailed('<q>', '<reason>'), 503),
        },
      },
    },
    async (request) => ({ results: await deps.images.search(request.query.q, request.query.limit) }),
  );

  app.post<{ Body: Static<typeof PullBodySchema>; Headers: Static<typeof PullHeadersSchema> }>(
    '/images/pull',
    {
      schema: {
        tags: ['images'],
        summary: 'Pull an image from its registry (allowlisted references only)',
        description: PULL_DESCRIPTION,
        headers: PullHeadersSchema,
        body: withExample(PullBodySchema, { image: 'docker.io/library/python:3.12-slim' }),
        response: {
          200: withExample(PullResponseSchema, { success: true, image_id: '8f3b1c2d4e5f', image: 'docker.io/library/python:3.12-slim' }),
          ...errorResponses(
            400,
            errors.imageNotAllowed('<image>', 'image'),
            401,
            errors.imageNotInRegistry('<image>', '<registry>'),
            429,
            errors.imagePullFailed('<image>', '<reason>'),
            errors.runtimeUnavailable('<reason>'),
            errors.blacklistUnavailable('<reason>'),
            errors.streamsAtCapacity('<limit>'),
          ),
        },
      },
    },
    async (request, reply) => {
      const pull = deps.images.preparePull(request.body);
      if (!acceptsEventStream(request.headers.accept)) return pull.run();
      await streamEvents(reply, pullStream, async (events) => {
        const pulled = await pull
          .run({ signal: events.signal, onProgress: (progress) => events.send({ type: 'progress', ...progress }) })
          .catch((error: unknown) => {
            if (events.signal.aborted) return undefined; // the client left; the pull was stopped with it
            throw error;
          });
        if (pulled) events.send({ type: 'done', ...pulled });
      });
    },
  );

  const oneImage = {
    tags: ['images'],
    response: { 200: withExample(ImageSchema, EXAMPLE_IMAGE), ...errorResponses(400, 401, errors.notFound('image "<name>"'), 429, 503) },
  };
  app.get<{ Params: Static<typeof NameParamsSchema> }>(
    '/images/:name',
    { schema: { ...oneImage, summary: 'One local image by reference', params: NameParamsSchema } },
    async (request) => deps.images.get(request.params.name),
  );
  // The same with the reference's slashes left unencoded: /images/localhost/berth-agent:0.1.0-alpha.
  app.get<{ Params: Static<typeof WildcardParamsSchema> }>(
    '/images/*',
    { schema: { ...oneImage, hide: true, params: WildcardParamsSchema } },
    async (request) => deps.images.get(request.params['*']),
  );
}
