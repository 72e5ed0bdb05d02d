// An OTLP/HTTP trace receiver for tests that decodes what it is sent, as a collector does: only
// `POST /v1/traces` exists (404 elsewhere, as on a collector), the body must be `application/json` and an
// ExportTraceServiceRequest in OTLP's JSON encoding (opentelemetry-proto's trace.proto: lowerCamelCase
// fields, trace and span ids as hex of 16 and 8 bytes, times as decimal nanoseconds, enum values as
// numbers, AnyValue as a one-of). A body that is not one is refused with 400 and a google.rpc.Status body,
// and counted, so a test can require that every export decoded. Served over plain HTTP or over TLS.
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IExportTraceServiceRequest, ISpan } from '@opentelemetry/otlp-transformer/build/src/trace/internal-types.js';

/** A span as decoded: ids in hex, times in nanoseconds, attributes as plain values. */
export interface DecodedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** The resource's attributes (service.name …). */
  readonly resource: Readonly<Record<string, string | number | boolean>>;
}

export interface ReceivedExport {
  readonly path: string;
  readonly contentType: string;
  readonly spans: readonly DecodedSpan[];
}

export interface OtlpReceiver {
  readonly port: number;
  /** Base URL (`http(s)://127.0.0.1:<port>`), without the signal's path. */
  readonly url: string;
  /** Exports that decoded, in arrival order. */
  readonly exports: ReceivedExport[];
  /** Requests refused: wrong path, method, content type, or a body that is no ExportTraceServiceRequest. */
  readonly refused: { path: string; status: number; reason: string }[];
  spans(): DecodedSpan[];
  /** Called for each TLS handshake that failed (a client that refused the certificate). */
  onTlsClientError(listener: (error: Error) => void): void;
  close(): Promise<void>;
}

export class OtlpDecodeError extends Error {}

const HEX = (bytes: number) => new RegExp(`^[0-9a-f]{${bytes * 2}}$`);
const TRACE_ID = HEX(16);
const SPAN_ID = HEX(8);
const NANOS = /^\d{1,20}$/;

function fail(where: string, what: string): never {
  throw new OtlpDecodeError(`${where}: ${what}`);
}

function array(value: unknown, where: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(where, 'expected an array');
  return value;
}

function object(value: unknown, where: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(where, 'expected an object');
  return value as Record<string, unknown>;
}

/** A fixed64 nanosecond time: OTLP/JSON writes it as a decimal string (a number is accepted too). */
function nanos(value: unknown, where: string): bigint {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && NANOS.test(value)) return BigInt(value);
  return fail(where, `not a nanosecond time: ${JSON.stringify(value)}`);
}

function id(value: unknown, pattern: RegExp, where: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) fail(where, `not a hex id of the right length: ${JSON.stringify(value)}`);
  if (/^0+$/.test(value)) fail(where, 'an all-zero id is invalid');
  return value;
}

/** AnyValue: exactly one of its fields. Arrays and maps are decoded too, but flattened to JSON text here. */
function anyValue(value: unknown, where: string): string | number | boolean {
  const fields = Object.entries(object(value, where));
  if (fields.length !== 1) fail(where, `an AnyValue holds one field, not ${fields.length}`);
  const [kind, inner] = fields[0]!;
  switch (kind) {
    case 'stringValue':
      if (typeof inner !== 'string') fail(where, 'stringValue is no string');
      return inner;
    case 'boolValue':
      if (typeof inner !== 'boolean') fail(where, 'boolValue is no boolean');
      return inner;
    case 'intValue':
      // int64: a decimal string in OTLP/JSON, a number from some encoders.
      if (typeof inner === 'number' && Number.isSafeInteger(inner)) return inner;
      if (typeof inner === 'string' && /^-?\d{1,19}$/.test(inner)) return Number(inner);
      return fail(where, `intValue is no int64: ${JSON.stringify(inner)}`);
    case 'doubleValue':
      if (typeof inner !== 'number') fail(where, 'doubleValue is no number');
      return inner;
    case 'arrayValue':
      return JSON.stringify(array(object(inner, where).values, `${where}.values`).map((v, i) => anyValue(v, `${where}.values[${i}]`)));
    case 'kvlistValue':
      return JSON.stringify(attributes(object(inner, where).values, `${where}.values`));
    case 'bytesValue':
      if (typeof inner !== 'string') fail(where, 'bytesValue is no base64 string');
      return inner;
    default:
      return fail(where, `unknown AnyValue field ${kind}`);
  }
}

function attributes(value: unknown, where: string): Record<string, string | number | boolean> {
  const decoded: Record<string, string | number | boolean> = {};
  array(value, where).forEach((entry, index) => {
    const pair = object(entry, `${where}[${index}]`);
    if (typeof pair.key !== 'string' || pair.key === '') fail(`${where}[${index}].key`, 'expected a non-empty key');
    decoded[pair.key] = anyValue(pair.value, `${where}[${index}].value`);
  });
  return decoded;
}

function span(value: unknown, where: string, resource: Record<string, string | number | boolean>): DecodedSpan {
  const raw = object(value, where) as unknown as ISpan;
  if (typeof raw.name !== 'string' || raw.name === '') fail(`${where}.name`, 'a span has a name');
  const kind = raw.kind ?? 0;
  if (!Number.isInteger(kind) || kind < 0 || kind > 5) fail(`${where}.kind`, `not a SpanKind: ${JSON.stringify(raw.kind)}`);
  const start = nanos(raw.startTimeUnixNano, `${where}.startTimeUnixNano`);
  const end = nanos(raw.endTimeUnixNano, `${where}.endTimeUnixNano`);
  if (end < start) fail(where, 'ends before it starts');
  const parent = raw.parentSpanId === undefined || raw.parentSpanId === '' ? undefined : id(raw.parentSpanId, SPAN_ID, `${where}.parentSpanId`);
  return {
    traceId: id(raw.traceId, TRACE_ID, `${where}.traceId`),
    spanId: id(raw.spanId, SPAN_ID, `${where}.spanId`),
    parentSpanId: parent,
    name: raw.name,
    kind,
    startTimeUnixNano: start,
    endTimeUnixNano: end,
    attributes: attributes(raw.attributes, `${where}.attributes`),
    resource,
  };
}

/** Decodes an ExportTraceServiceRequest in OTLP/JSON; throws OtlpDecodeError naming the first field that is not. */
export function decodeTraceRequest(body: string): DecodedSpan[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new OtlpDecodeError(`not JSON: ${(error as Error).message}`);
  }
  const request = object(parsed, 'ExportTraceServiceRequest') as IExportTraceServiceRequest;
  const spans: DecodedSpan[] = [];
  array(request.resourceSpans, 'resourceSpans').forEach((resourceSpans, r) => {
    const where = `resourceSpans[${r}]`;
    const entry = object(resourceSpans, where);
    const resource = entry.resource === undefined ? {} : attributes(object(entry.resource, `${where}.resource`).attributes, `${where}.resource.attributes`);
    array(entry.scopeSpans, `${where}.scopeSpans`).forEach((scopeSpans, s) => {
      const scope = object(scopeSpans, `${where}.scopeSpans[${s}]`);
      array(scope.spans, `${where}.scopeSpans[${s}].spans`).forEach((value, i) => spans.push(span(value, `${where}.scopeSpans[${s}].spans[${i}]`, resource)));
    });
  });
  return spans;
}

export async function startOtlpReceiver(options: { tls?: { key: string; cert: string } } = {}): Promise<OtlpReceiver> {
  const exports: ReceivedExport[] = [];
  const refused: { path: string; status: number; reason: string }[] = [];
  const answer = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '';
      const contentType = String(req.headers['content-type'] ?? '');
      const refuse = (status: number, reason: string) => {
        refused.push({ path, status, reason });
        // google.rpc.Status, as OTLP/HTTP answers a refused request.
        answer(res, status, { code: status === 400 ? 3 : 5, message: reason });
      };
      if (req.method !== 'POST' || path !== '/v1/traces') return refuse(404, `no ${req.method} ${path} here`);
      if (!contentType.startsWith('application/json')) return refuse(415, `content type ${contentType}`);
      try {
        const spans = decodeTraceRequest(Buffer.concat(chunks).toString('utf8'));
        exports.push({ path, contentType, spans });
        answer(res, 200, {});
      } catch (error) {
        if (!(error instanceof OtlpDecodeError)) throw error;
        refuse(400, error.message);
      }
    });
  };
  const server: Server = options.tls ? createHttpsServer(options.tls, handler) : createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    exports,
    refused,
    spans: () => exports.flatMap((e) => e.spans),
    onTlsClientError: (listener) => server.on('tlsClientError', listener),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
