// Authentication (docs/auth.md): the tokens Berth issues, the blacklist of revoked ones, and the API tokens
// that may ask for them.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { AuthService } from '../core/auth/auth-service.js';
import { TokenService } from '../core/auth/tokens.js';
import { createBlacklist } from '../store/blacklist/create-blacklist.js';
import type { Teardown } from './teardown.js';

export function buildAuth({ config, logger, teardown }: { readonly config: Config; readonly logger: Logger; readonly teardown: Teardown }): AuthService {
  const tokens = new TokenService({
    // With authentication off nothing is verified; a random key keeps the service constructible.
    secret: config.auth.enabled ? config.auth.jwtSecret : randomBytes(32).toString('hex'),
    accessTtlMs: config.auth.accessTtlMs,
    refreshTtlMs: config.auth.refreshTtlMs,
  });
  const blacklist = createBlacklist(config.auth, { onCleanupError: (error) => logger.warn({ err: error }, 'blacklist cleanup failed') });
  teardown.release(() => blacklist.close());
  if (!config.auth.enabled) logger.warn('authentication is disabled (SERVICE_AUTH_ENABLED=false): anyone who reaches the API can run agents');
  return new AuthService({ tokens, blacklist, apiTokens: config.auth.apiTokens, log: logger });
}
