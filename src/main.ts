// Composition root: read the configuration, build adapters and services, start the listeners, and tear
// everything down again on SIGINT/SIGTERM.
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logging.js';
import { startBerth } from './server.js';

const STOPPING = {
  stop: 'stopping: cancelling runs and agents and removing their containers',
  drain: 'stopping: refusing new work and letting the work in flight finish',
  detach: 'stopping: leaving runs, jobs and agents running for the next start',
} as const;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`berth: invalid configuration: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(config);
  const berth = await startBerth(config, logger);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, mode: config.shutdown.mode }, STOPPING[config.shutdown.mode]);
    berth
      .stop()
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'unclean stop');
        process.exit(1);
      });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`berth: failed to start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
