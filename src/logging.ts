// pino, JSON by default; SERVICE_LOG_FORMAT=text pretty-prints for people at a terminal.
import { trace } from '@opentelemetry/api';
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

/** Log lines written inside a traced request or run carry its trace id, to find the trace from the log. */
export function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span || !span.isRecording()) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

export function createLogger(config: Pick<Config, 'logFormat' | 'logLevel'>): Logger {
  const options = { level: config.logLevel, base: { service: 'berth' }, mixin: traceFields };
  if (config.logFormat === 'text') {
    return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: false, translateTime: 'SYS:standard', ignore: 'pid,hostname,service' } } });
  }
  return pino(options);
}
