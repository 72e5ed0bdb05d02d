// The tracing endpoint as operators write it (OpenTelemetry's base-URL convention), and the warning about
// failed exports: the first at once, then at most one per interval with the count, and a line on recovery.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { SpanExporter } from '@opentelemetry/sdk-trace-node';
import { ReportingExporter, tracesUrl } from '../../src/tracing.js';

test('a collector\'s base URL gets /v1/traces; a URL with a path is used as given', () => {
  assert.equal(tracesUrl('http://collector:4318'), 'http://collector:4318/v1/traces');
  assert.equal(tracesUrl('https://collector.example:4318/'), 'https://collector.example:4318/v1/traces');
  assert.equal(tracesUrl('https://collector.example:4318/v1/traces'), 'https://collector.example:4318/v1/traces');
  assert.equal(tracesUrl('https://gateway.example/otlp/v1/traces'), 'https://gateway.example/otlp/v1/traces');
  assert.equal(tracesUrl('https://gateway.example/otlp'), 'https://gateway.example/otlp', 'a proxy\'s own path is the operator\'s');
});

/** An exporter whose next results a test decides (0 success, 1 failure, as ExportResultCode). */
function scripted(codes: number[]): SpanExporter {
  return {
    export: (_spans, done) => done(codes.shift() === 0 ? { code: 0 } : { code: 1, error: new Error('connect ECONNREFUSED 127.0.0.1:4318') }),
    shutdown: async () => undefined,
  };
}

test('failed exports: one warning at once, then at most one per interval naming how many failed; recovery is said once', () => {
  const lines: { level: string; details: Record<string, unknown>; message: string }[] = [];
  const log = {
    info: (details: Record<string, unknown>, message: string) => lines.push({ level: 'info', details, message }),
    warn: (details: Record<string, unknown>, message: string) => lines.push({ level: 'warn', details, message }),
  };
  let now = 0;
  const results: number[] = [];
  const exporter = new ReportingExporter(scripted([1, 1, 1, 1, 0, 0, 1]), 'http://collector:4318/v1/traces', log, 60_000, () => now);
  const exportAt = (at: number) => {
    now = at;
    exporter.export([], (result) => results.push(result.code));
  };
  exportAt(0); // warns
  exportAt(10_000); // counted
  exportAt(30_000); // counted
  exportAt(61_000); // warns: three since the last warning
  exportAt(62_000); // works again: said once
  exportAt(63_000);
  exportAt(64_000); // fails again, within the interval of the last warning: counted
  assert.deepEqual(results, [1, 1, 1, 1, 0, 0, 1], 'the results are passed on unchanged');
  assert.deepEqual(lines.map((line) => [line.level, line.details.failedExports]), [['warn', 1], ['warn', 3], ['info', undefined]]);
  assert.equal(lines[0]!.details.endpoint, 'http://collector:4318/v1/traces');
  assert.match(String(lines[0]!.details.error), /ECONNREFUSED/);
  assert.equal(lines[2]!.message, 'trace export works again');
});
