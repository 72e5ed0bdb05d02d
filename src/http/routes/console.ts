// GET /console: the web console, a single-page app built into packages/console/dist and served as static
// files from the API listener. The files hold no data (every API call the console makes carries the
// caller's token), so they are open routes; they are kept out of the OpenAPI document.
//
// Decisions:
// - History routing: a path whose last segment has no dot (/console/agents/agent-…) is one of the app's
//   pages and gets index.html; a missing file (/console/assets/x.js, /console/.env) is a 404, never HTML that
//   a browser would then try to run as a script.
// - Whether the build exists is checked per request, so a console built after Berth started is served
//   without a restart; until then /console answers 503 saying how to build it.
// - Every response carries a Content-Security-Policy that allows Berth's own origin only: no inline
//   script or style, no other host to load from or talk to, no framing.
import { stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../../errors.js';

export const CONSOLE_PATH = '/console';

export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/** Vite names every file under assets/ after its content hash: a changed file gets a new name. */
const HASHED_ASSETS = /^assets\//;

export interface ConsoleDeps {
  /** The console's build: a directory holding index.html and assets/. */
  readonly dir: string;
}

async function isBuilt(dir: string): Promise<boolean> {
  return stat(join(dir, 'index.html')).then((s) => s.isFile(), () => false);
}

export async function registerConsoleRoutes(app: FastifyInstance, deps: ConsoleDeps): Promise<void> {
  await app.register(async (scope) => {
    // serve: false: only reply.sendFile is wanted, under the routes below (the plugin's own wildcard route
    // would answer a missing build with a 404 instead of saying what to do).
    await scope.register(fastifyStatic, { serve: false });
    scope.addHook('onRequest', async (_request, reply) => {
      reply.headers(CONSOLE_SECURITY_HEADERS);
    });

    // Files without a hash in their name are revalidated on every load, so a rebuilt console is seen at once.
    const sendFresh = (reply: FastifyReply, file: string) =>
      reply.header('Cache-Control', 'no-cache').sendFile(file, deps.dir, { cacheControl: false, dotfiles: 'ignore' });

    const serve = async (request: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
      if (!(await isBuilt(deps.dir))) throw errors.consoleNotBuilt();
      const file = request.params['*'] ?? '';
      // No dotfiles, no way out of the build: answered like a missing file (send would refuse them too,
      // but with a 403 that would read as a malformed request).
      if (file.includes('\0') || file.split('/').some((segment) => segment.startsWith('.'))) return reply.callNotFound();
      if (!basename(file).includes('.')) return sendFresh(reply, 'index.html');
      // A missing file calls the not-found handler: Berth's 404 error body.
      return HASHED_ASSETS.test(file)
        ? reply.sendFile(file, deps.dir, { dotfiles: 'ignore', maxAge: '365d', immutable: true })
        : sendFresh(reply, file);
    };

    scope.get(CONSOLE_PATH, { schema: { hide: true } }, serve);
    scope.get(`${CONSOLE_PATH}/*`, { schema: { hide: true } }, serve);
  });
}
