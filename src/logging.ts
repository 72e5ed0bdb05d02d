// pino, JSON by default; SERVICE_LOG_FORMAT=text pretty-prints for people at a terminal.
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

export function createLogger(config: Pick<Config, 'logFormat' | 'logLevel'>): Logger {
  const options = { level: config.logLevel, base: { service: 'berth' } };
  if (config.logFormat === 'text') {
    return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: false, translateTime: 'SYS:standard', ignore: 'pid,hostname,service' } } });
  }
  return pino(options);
}
