// Sends one webhook: POST of a JSON body, signed once, then retried with exponential back-off on network
// errors, timeouts and 5xx answers, re-sending the same bytes with the same timestamp and signature. A
// 2xx is delivered; any other answer (3xx: redirects are not followed; 4xx) ends the delivery at once.
import { isIP } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Agent, fetch } from 'undici';
import type { DestinationPolicy } from './destination-policy.js';
import { signatureHeaders } from './signer.js';

const tracer = trace.getTracer('berth');

export interface WebhookDelivery {
  readonly url: string;
  /** The exact body bytes (UTF-8 JSON) that are signed and sent. */
  readonly body: string;
  /** Unix seconds; identical on every attempt. */
  readonly timestamp: number;
}

export type DeliveryResult =
  | { readonly outcome: 'delivered'; readonly attempts: number; readonly status: number }
  | { readonly outcome: 'failed'; readonly attempts: number; readonly reason: string }
  /** Stopped by the caller's signal (service shutdown) before an answer; the delivery is still owed. */
  | { readonly outcome: 'aborted'; readonly attempts: number };

export interface WebhookSettings {
  /** Empty: unsigned. */
  readonly signingSecret: string;
  /** Retries after the first attempt. */
  readonly maxRetries: number;
  /** The wait before retry n (0-based) is retryBaseDelayMs × 2^n. */
  readonly retryBaseDelayMs: number;
  /** Per attempt: connecting, sending and receiving the status line. */
  readonly timeoutMs: number;
}

export interface WebhookObserver {
  /** One per attempt: delivered (2xx), retried (a retry follows), failed (the delivery gives up). */
  attempt(outcome: 'delivered' | 'retried' | 'failed'): void;
}

export interface WebhookSender {
  deliver(delivery: WebhookDelivery, signal: AbortSignal): Promise<DeliveryResult>;
}

type Attempt = { kind: 'delivered'; status: number } | { kind: 'retryable'; reason: string } | { kind: 'final'; reason: string };

export class WebhookDeliverer implements WebhookSender {
  /** Connects only to addresses the destination policy allows, resolved by the policy itself. */
  private readonly dispatcher: Agent;

  constructor(
    private readonly settings: WebhookSettings,
    private readonly options: { readonly userAgent: string; readonly observer?: WebhookObserver; readonly destinations: DestinationPolicy },
  ) {
    this.dispatcher = new Agent({ connect: { lookup: options.destinations.connectLookup() as never } });
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  async deliver(delivery: WebhookDelivery, signal: AbortSignal): Promise<DeliveryResult> {
    const headers = {
      'content-type': 'application/json',
      'user-agent': this.options.userAgent,
      ...signatureHeaders(this.settings.signingSecret, delivery.timestamp, delivery.body),
    };
    const { maxRetries, retryBaseDelayMs } = this.settings;
    for (let attempt = 0; ; attempt += 1) {
      if (signal.aborted) return { outcome: 'aborted', attempts: attempt };
      const result = await this.attempt(delivery, headers, signal);
      if (signal.aborted && result.kind !== 'delivered') return { outcome: 'aborted', attempts: attempt + 1 };
      if (result.kind === 'delivered') {
        this.options.observer?.attempt('delivered');
        return { outcome: 'delivered', attempts: attempt + 1, status: result.status };
      }
      if (result.kind === 'final' || attempt >= maxRetries) {
        this.options.observer?.attempt('failed');
        return { outcome: 'failed', attempts: attempt + 1, reason: result.reason };
      }
      this.options.observer?.attempt('retried');
      try {
        await delay(retryBaseDelayMs * 2 ** attempt, undefined, { signal });
      } catch {
        return { outcome: 'aborted', attempts: attempt + 1 };
      }
    }
  }

  /** One delivery attempt as a span, its context sent along as `traceparent` so the receiver can join the trace. */
  private async attempt(delivery: WebhookDelivery, headers: Record<string, string>, signal: AbortSignal): Promise<Attempt> {
    const span = tracer.startSpan('webhook.deliver', { kind: SpanKind.CLIENT, attributes: { 'server.address': new URL(delivery.url).hostname } });
    const traced = { ...headers };
    propagation.inject(trace.setSpan(context.active(), span), traced);
    try {
      const result = await this.attemptOnce(delivery, traced, signal);
      span.setAttribute('berth.webhook.result', result.kind);
      if (result.kind !== 'delivered') span.setStatus({ code: SpanStatusCode.ERROR, message: result.reason });
      return result;
    } finally {
      span.end();
    }
  }

  private async attemptOnce(delivery: WebhookDelivery, headers: Record<string, string>, signal: AbortSignal): Promise<Attempt> {
    // A literal IP is connected to without a lookup: judged here. Names are judged by the lookup, on the
    // addresses the socket then connects to. A denied destination is final: retrying cannot change it.
    const host = new URL(delivery.url).hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0 && !this.options.destinations.allows(host, host)) {
      return { kind: 'final', reason: `webhook destination ${host} is an internal address (SERVICE_WEBHOOK_ALLOWED_HOSTS does not name it)` };
    }
    try {
      const response = await fetch(delivery.url, {
        method: 'POST',
        headers,
        body: delivery.body,
        redirect: 'manual',
        dispatcher: this.dispatcher,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.settings.timeoutMs)]),
      });
      // The body is not read: only the status counts, and an endless body must not hold the delivery.
      await response.body?.cancel().catch(() => undefined);
      if (response.status >= 200 && response.status < 300) return { kind: 'delivered', status: response.status };
      const reason = `answered HTTP ${response.status}`;
      return response.status >= 500 ? { kind: 'retryable', reason } : { kind: 'final', reason };
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const name = (error as Error).name;
      if (cause?.code === 'EDESTINATIONDENIED') return { kind: 'final', reason: cause.message ?? 'destination denied' };
      const reason = name === 'TimeoutError' ? `no answer within ${this.settings.timeoutMs} ms` : (cause?.code ?? cause?.message ?? (error as Error).message);
      return { kind: 'retryable', reason: `request failed: ${reason}` };
    }
  }
}
