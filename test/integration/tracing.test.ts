// Tracing against an OTLP/HTTP receiver started here: the request span, the run span and its phase spans
// with the right parents, Podman calls under the run, a webhook delivery carrying `traceparent`, log lines
// carrying the trace id — and no prompt, secret or token text anywhere in what was exported.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: { stringValue?: string; intValue?: number | string } }[];
}

const attribute = (span: ExportedSpan, key: string) => span.attributes?.find((a) => a.key === key)?.value;

async function listen(handler: (body: string, headers: IncomingHttpHeaders) => void): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      handler(body, req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('tracing', () => {
  const exported: string[] = [];
  const webhookHeaders: IncomingHttpHeaders[] = [];
  const logs: Record<string, unknown>[] = [];
  const apiToken = `berth-test-${randomBytes(16).toString('hex')}`;
  const marker = `PROMPT-MARKER-${randomBytes(6).toString('hex')}`;
  let collector: { server: Server; port: number };
  let receiver: { server: Server; port: number };
  let t: TestBerth;
  let accessToken = '';

  before(async () => {
    collector = await listen((body) => exported.push(body));
    receiver = await listen((_body, headers) => webhookHeaders.push(headers));
    t = await startTestBerth(
      {
        SERVICE_TRACING_ENDPOINT: `http://127.0.0.1:${collector.port}/v1/traces`,
        SERVICE_TRACING_INSECURE: 'true',
        SERVICE_AUTH_ENABLED: 'true',
        SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
        SERVICE_API_TOKENS: apiToken,
        SERVICE_LOG_LEVEL: 'info',
        SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      },
      { onLog: (record) => logs.push(record) },
    );
    accessToken = (await t.request('POST', '/auth/token', { client_id: 'traced-caller' }, { authorization: `Bearer ${apiToken}` })).body.access_token;
  });
  after(async () => {
    await t?.stop();
    for (const { server } of [collector, receiver]) if (server) await new Promise((resolve) => server.close(resolve));
  });

  test('a run and a job are traced end to end, and nothing secret is exported', async () => {
    const auth = { authorization: `Bearer ${accessToken}` };
    const run = await t.request('POST', '/run', { prompt: `say: ${marker}` }, auth);
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const job = await t.request('POST', '/run/async', { prompt: `say: ${marker} again`, webhook_url: `http://127.0.0.1:${receiver.port}/hook` }, auth);
    assert.equal(job.status, 200, JSON.stringify(job.body));
    for (let i = 0; webhookHeaders.length === 0; i++) {
      assert.ok(i < 120, 'the webhook arrives');
      await delay(250);
    }
    await t.stop(); // flushes the exporter

    const raw = exported.join('\n');
    for (const secret of [marker, accessToken, apiToken]) assert.ok(!raw.includes(secret), 'no prompt, access token or API token in the exported data');
    const spans: ExportedSpan[] = exported.flatMap((body) =>
      (JSON.parse(body).resourceSpans ?? []).flatMap((r: { scopeSpans: { spans: ExportedSpan[] }[] }) => r.scopeSpans.flatMap((s) => s.spans)),
    );
    const named = (name: string) => spans.filter((s) => s.name === name);
    const request = named('POST /run')[0];
    assert.ok(request, `a request span (have: ${[...new Set(spans.map((s) => s.name))].join(', ')})`);
    assert.equal(attribute(request, 'enduser.id')?.stringValue, 'traced-caller', 'the caller\'s sub');
    assert.equal(String(attribute(request, 'http.response.status_code')?.intValue), '200');
    const runSpan = named('berth.run').find((s) => s.parentSpanId === request.spanId);
    assert.ok(runSpan, 'the run span is the request span\'s child');
    assert.equal(runSpan.traceId, request.traceId);
    for (const phase of ['validate', 'image_check', 'session', 'create', 'start', 'first_output', 'engine_exit', 'remove']) {
      assert.ok(named(`berth.run.${phase}`).some((s) => s.parentSpanId === runSpan.spanId), `phase span ${phase} under the run`);
    }
    assert.ok(spans.some((s) => s.name === 'podman POST /containers/create' && s.parentSpanId === runSpan.spanId), 'Podman calls under the run');
    const asyncRequest = named('POST /run/async')[0];
    assert.ok(asyncRequest && named('berth.run').some((s) => s.parentSpanId === asyncRequest.spanId), 'the job\'s run under its submission');

    const webhook = named('webhook.deliver')[0];
    assert.ok(webhook, 'a webhook delivery span');
    const traceparent = String(webhookHeaders[0]!.traceparent ?? '');
    assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    assert.equal(traceparent.split('-')[1], webhook.traceId, 'the receiver can join the delivery\'s trace');
    assert.equal(traceparent.split('-')[2], webhook.spanId);

    const finished = logs.find((record) => record.msg === 'run finished' && record.mode === 'sync');
    assert.equal(finished?.trace_id, request.traceId, 'the run\'s log line carries its trace id');
  });
});
