// A run as a trace span, child of the request that accepted it, with a child span per phase (validate,
// image check, session, queue, create, start, first output, engine exit, remove) at the times the phases
// ran. Attributes are ids, modes and outcomes only: never the prompt, a secret or a token.
import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { RunPhases } from '../run-phases.js';

const tracer = trace.getTracer('berth');

export function startRunSpan(phases: RunPhases): Span {
  return tracer.startSpan('berth.run', { startTime: phases.startedAtMs });
}

export function endRunSpan(span: Span, phases: RunPhases, ended: { readonly runId: string; readonly sessionId: string; readonly mode: string; readonly outcome: string }): void {
  span.setAttributes({ 'berth.run.id': ended.runId, 'berth.session.id': ended.sessionId, 'berth.run.mode': ended.mode, 'berth.run.outcome': ended.outcome });
  if (ended.outcome !== 'completed') span.setStatus({ code: SpanStatusCode.ERROR, message: ended.outcome });
  const parent = trace.setSpan(context.active(), span);
  for (const interval of phases.intervals()) {
    tracer.startSpan(`berth.run.${interval.phase}`, { startTime: interval.startMs }, parent).end(interval.endMs);
  }
  span.end();
}
