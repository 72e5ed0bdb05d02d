// Builds the configured blacklist backend and runs its cleanup: every blacklistCleanupIntervalMs the
// entries of tokens that have expired anyway are removed. The timer is unref'd (it never keeps the
// process alive) and close() stops it before closing the backend.
import type { Config } from '../../config.js';
import type { TokenBlacklist } from './blacklist.js';
import { MemoryBlacklist } from './memory-blacklist.js';
import { SqliteBlacklist } from './sqlite-blacklist.js';

export interface CreateBlacklistOptions {
  readonly now?: () => number;
  /** Called when a cleanup pass fails (the blacklist stays usable; the next pass retries). */
  readonly onCleanupError?: (error: unknown) => void;
  /**
   * A backend the caller opened (the shared PostgreSQL one, with SERVICE_DATABASE_URL), used instead of the
   * configured SERVICE_AUTH_BLACKLIST_BACKEND: nodes sharing a database must share their blacklist.
   */
  readonly backend?: TokenBlacklist;
}

type BlacklistConfig = Pick<Config['auth'], 'blacklistBackend' | 'blacklistBoltPath' | 'blacklistCleanupIntervalMs'>;

export function createBlacklist(config: BlacklistConfig, options: CreateBlacklistOptions = {}): TokenBlacklist {
  const now = options.now ?? Date.now;
  const backend: TokenBlacklist =
    options.backend ?? (config.blacklistBackend === 'bolt' ? new SqliteBlacklist(config.blacklistBoltPath) : new MemoryBlacklist());

  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    backend
      .removeExpired(now())
      .catch((error: unknown) => options.onCleanupError?.(error))
      .finally(() => {
        running = false;
      });
  }, config.blacklistCleanupIntervalMs);
  timer.unref();

  return {
    add: (jti, expiresAtMs) => backend.add(jti, expiresAtMs),
    has: (jti) => backend.has(jti),
    removeExpired: (nowMs) => backend.removeExpired(nowMs),
    close: async () => {
      clearInterval(timer);
      await backend.close();
    },
  };
}
