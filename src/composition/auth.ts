// Authentication (docs/auth.md): the tokens Berth issues, the blacklist of revoked ones, and the API tokens
// that may ask for them.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { AuthService } from '../core/auth/auth-service.js';
import { TokenService } from '../core/auth/tokens.js';
import { createBlacklist } from '../store/blacklist/create-blacklist.js';
import { PostgresBlacklist } from '../store/blacklist/postgres-blacklist.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import type { Teardown } from './teardown.js';

export interface AuthInputs {
  readonly config: Config;
  /** The shared database (SERVICE_DATABASE_URL): the blacklist is kept there, for every node; undefined: SERVICE_AUTH_BLACKLIST_BACKEND. */
  readonly database: PostgresDatabase | undefined;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export async function buildAuth({ config, database, logger, teardown }: AuthInputs): Promise<AuthService> {
  const tokens = new TokenService({
    // With authentication off nothing is verified; a random key keeps the service constructible.
    secret: config.auth.enabled ? config.auth.jwtSecret : randomBytes(32).toString('hex'),
    accessTtlMs: config.auth.accessTtlMs,
    refreshTtlMs: config.auth.refreshTtlMs,
  });
  // With a shared database the blacklist is the nodes' one: a token logged out on one node is refused by all.
  const shared = database ? await PostgresBlacklist.open(database) : undefined;
  const blacklist = createBlacklist(config.auth, { backend: shared, onCleanupError: (error) => logger.warn({ err: error }, 'blacklist cleanup failed') });
  teardown.release(() => blacklist.close());
  if (!config.auth.enabled) logger.warn('authentication is disabled (SERVICE_AUTH_ENABLED=false): anyone who reaches the API can run agents');
  return new AuthService({ tokens, blacklist, apiTokens: config.auth.apiTokens, log: logger });
}
