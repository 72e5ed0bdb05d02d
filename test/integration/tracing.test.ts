// Tracing against an OTLP/HTTP receiver started here: the request span, the run span and its phase spans
// with the right parents, Podman calls under the run, a webhook delivery carrying `traceparent`, log lines
// carrying the trace id — and no prompt, secret or token text anywhere in what was exported.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { poolReady, startTestBerth, type TestBerth } from '../support/berth.js';

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
        // The caller's sub, and so the traced enduser.id, is the API token's name.
        SERVICE_API_TOKENS: `traced-caller:${apiToken}`,
        SERVICE_LOG_LEVEL: 'info',
        SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      },
      { onLog: (record) => logs.push(record) },
    );
    accessToken = (await t.request('POST', '/auth/token', { client_id: 'tracing-test' }, { authorization: `Bearer ${apiToken}` })).body.access_token;
  });
  after(async () => {
    await t?.stop();
    for (const { server } of [collector, receiver]) if (server) await new Promise((resolve) => server.close(resolve));
  });

  test('a run and a job are traced end to end, and nothing secret is exported', async () => {
    const auth = { authorization: `Bearer ${accessToken}` };
    // The default request claims a pre-started engine; one with its own workdir starts a container of its own.
    await poolReady(t, 1);
    const run = await t.request('POST', '/run', { prompt: `say: ${marker}` }, auth);
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const fresh = await t.request('POST', '/run', { prompt: `say: ${marker} fresh`, workdir: '/tmp' }, auth);
    assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
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
    const requests = named('POST /run');
    assert.equal(requests.length, 2, `a request span per run (have: ${[...new Set(spans.map((s) => s.name))].join(', ')})`);
    const runUnder = (parent: ExportedSpan) => {
      const found = named('berth.run').find((s) => s.parentSpanId === parent.spanId);
      assert.ok(found, 'the run span is the request span\'s child');
      assert.equal(found.traceId, parent.traceId);
      return found;
    };
    const phasesUnder = (span: ExportedSpan) =>
      new Set(spans.filter((s) => s.parentSpanId === span.spanId && s.name.startsWith('berth.run.')).map((s) => s.name.slice('berth.run.'.length)));
    for (const request of requests) {
      assert.equal(attribute(request, 'enduser.id')?.stringValue, 'traced-caller', 'the caller\'s sub');
      assert.equal(String(attribute(request, 'http.response.status_code')?.intValue), '200');
    }
    const [pooledRun, freshRun] = requests.map(runUnder).sort((a, b) => (phasesUnder(a).has('claim') ? -1 : 1) - (phasesUnder(b).has('claim') ? -1 : 1));
    const pooledPhases = phasesUnder(pooledRun!);
    for (const phase of ['validate', 'image_check', 'claim', 'first_output', 'result', 'engine_exit', 'remove']) {
      assert.ok(pooledPhases.has(phase), `phase span ${phase} under the pooled run (have: ${[...pooledPhases].join(', ')})`);
    }
    const freshPhases = phasesUnder(freshRun!);
    for (const phase of ['validate', 'image_check', 'session', 'create', 'start', 'first_output', 'result', 'engine_exit', 'remove']) {
      assert.ok(freshPhases.has(phase), `phase span ${phase} under the fresh run (have: ${[...freshPhases].join(', ')})`);
    }
    assert.ok(spans.some((s) => s.name === 'podman POST /containers/create' && s.parentSpanId === freshRun!.spanId), 'Podman calls under the run');
    const request = requests.find((r) => r.spanId === pooledRun!.parentSpanId)!;
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
