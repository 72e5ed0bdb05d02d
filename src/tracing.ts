// Tracing, off unless SERVICE_TRACING_ENDPOINT is set: OpenTelemetry's Node SDK exporting spans over
// OTLP/HTTP (JSON). The endpoint's TLS certificate is verified (Node's defaults); a plain http:// endpoint
// is refused at start unless SERVICE_TRACING_INSECURE=true says otherwise (config.ts). Spans never carry
// prompts, secrets or tokens: only routes, statuses, ids, phases and the caller's `sub`.
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node';

export interface TracingSettings {
  readonly endpoint: string | undefined;
  readonly sampleRatio: number;
  readonly serviceVersion: string;
  readonly instance: string;
}

/** Starts exporting when an endpoint is configured; the returned function flushes and stops. */
export function startTracing(settings: TracingSettings): () => Promise<void> {
  if (settings.endpoint === undefined) return async () => undefined;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'berth',
      'service.version': settings.serviceVersion,
      'service.instance.id': settings.instance,
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.endpoint }), { scheduledDelayMillis: 1000 })],
  });
  provider.register();
  return async () => {
    await provider.forceFlush().catch(() => undefined);
    await provider.shutdown().catch(() => undefined);
    trace.disable();
  };
}
