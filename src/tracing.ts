// Tracing, off unless SERVICE_TRACING_ENDPOINT is set: OpenTelemetry's Node SDK exporting spans over
// OTLP/HTTP (JSON). The endpoint's TLS certificate is verified (Node's defaults); a plain http:// endpoint
// is refused at start unless SERVICE_TRACING_INSECURE=true says otherwise (config.ts). Spans never carry
// prompts, secrets or tokens: only routes, statuses, ids, phases and the caller's `sub`.
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler, type SpanExporter } from '@opentelemetry/sdk-trace-node';

export interface TracingLog {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
}

export interface TracingSettings {
  readonly endpoint: string | undefined;
  readonly sampleRatio: number;
  readonly serviceVersion: string;
  readonly instance: string;
  readonly log: TracingLog;
  /** At most one warning about failed exports per this many milliseconds (default a minute). */
  readonly failureWarningIntervalMs?: number;
}

/** OTLP/HTTP's path for traces, which a collector's base URL leaves out. */
export const TRACES_PATH = '/v1/traces';

/**
 * The URL spans are sent to. OpenTelemetry's convention (OTEL_EXPORTER_OTLP_ENDPOINT): a collector's base
 * URL, `http://collector:4318` as collectors' docs show it, gets the signal's path appended; any other path
 * is the operator's and used as given (a collector behind a proxy's prefix, or `/v1/traces` spelt out).
 */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.pathname === '/' || url.pathname === '') url.pathname = TRACES_PATH;
  return url.toString();
}

/** ExportResultCode.SUCCESS of @opentelemetry/core (the exporter's result, typed through SpanExporter). */
const EXPORT_SUCCESS = 0;
type ExportResult = Parameters<Parameters<SpanExporter['export']>[1]>[0];

/**
 * Passes spans on to `exporter` and says when exports fail: a collector that is down, refuses the path or
 * fails the TLS check would otherwise lose every span without a word. One warning, then at most one per
 * `intervalMs` with the number of failed exports since, and one line when exports succeed again.
 */
export class ReportingExporter implements SpanExporter {
  private failedSinceWarning = 0;
  private lastWarningAt: number | undefined;
  private failing = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly url: string,
    private readonly log: TracingLog,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  export(spans: Parameters<SpanExporter['export']>[0], done: (result: ExportResult) => void): void {
    this.exporter.export(spans, (result) => {
      if (result.code === EXPORT_SUCCESS) this.succeeded();
      else this.failed(result, spans.length);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }

  private failed(result: ExportResult, spans: number): void {
    this.failing = true;
    this.failedSinceWarning++;
    const now = this.now();
    if (this.lastWarningAt !== undefined && now - this.lastWarningAt < this.intervalMs) return;
    this.log.warn(
      { endpoint: this.url, error: result.error?.message ?? 'unknown error', spans, failedExports: this.failedSinceWarning },
      `trace export failed: the spans are lost (at most one such warning per ${Math.round(this.intervalMs / 1000)} s)`,
    );
    this.lastWarningAt = now;
    this.failedSinceWarning = 0;
  }

  private succeeded(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info({ endpoint: this.url }, 'trace export works again');
  }
}

/** Starts exporting when an endpoint is configured; the returned function flushes and stops. */
export function startTracing(settings: TracingSettings): () => Promise<void> {
  if (settings.endpoint === undefined) return async () => undefined;
  const url = tracesUrl(settings.endpoint);
  const exporter = new ReportingExporter(new OTLPTraceExporter({ url }), url, settings.log, settings.failureWarningIntervalMs ?? 60_000);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'berth',
      'service.version': settings.serviceVersion,
      'service.instance.id': settings.instance,
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  provider.register();
  settings.log.info({ endpoint: url, sampleRatio: settings.sampleRatio }, 'exporting traces');
  return async () => {
    await provider.forceFlush().catch(() => undefined);
    await provider.shutdown().catch(() => undefined);
    trace.disable();
  };
}
