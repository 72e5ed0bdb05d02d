// Tracing as an operator configures it, against an OTLP receiver that decodes every export as a collector
// does (test/support/otlp-receiver.ts: only POST /v1/traces, OTLP/JSON checked field by field, 400
// otherwise): a collector's base URL gets /v1/traces appended; over TLS the certificate is verified (an
// unknown CA loses the spans and says so in one warning, not one per export; a CA the process trusts
// receives them); SERVICE_TRACING_SAMPLE_RATIO keeps about that share of traces, whole.
// Each Berth is a process of its own (test/support/service-process.ts), as in production: OpenTelemetry's
// API is process-global and the tracers Berth's modules take at import keep the first provider they saw,
// so a second Berth started inside one test process would export nothing. A SIGTERM flushes the exporter.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startOtlpReceiver, type DecodedSpan, type OtlpReceiver } from '../support/otlp-receiver.js';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';

const exec = promisify(execFile);

interface Certificates {
  readonly dir: string;
  readonly caFile: string;
  readonly key: string;
  readonly cert: string;
}

/** A CA of this test and a server certificate it signed for 127.0.0.1 (openssl; nothing trusts the CA by default). */
async function certificates(): Promise<Certificates> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-tracing-tls-'));
  const file = (name: string) => join(dir, name);
  await exec('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=berth test tracing CA',
    '-keyout', file('ca.key'), '-out', file('ca.pem')]);
  await exec('openssl', ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', file('server.key'), '-out', file('server.csr')]);
  await exec('sh', ['-c', `printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > ${file('ext')}`]);
  await exec('openssl', ['x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('ext'), '-out', file('server.pem')]);
  return { dir, caFile: file('ca.pem'), key: await readFile(file('server.key'), 'utf8'), cert: await readFile(file('server.pem'), 'utf8') };
}

const named = (spans: DecodedSpan[], name: string) => spans.filter((span) => span.name === name);

/** The service's log records (JSON lines on its output). */
function logRecords(service: ServiceProcess): Record<string, unknown>[] {
  return service.output().split('\n').flatMap((line) => {
    try {
      const record: unknown = JSON.parse(line);
      return typeof record === 'object' && record !== null ? [record as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

/** Starts a Berth process with `env` (no pools: they add nothing here), gives it to `body`, then stops it with SIGTERM (which flushes spans). */
async function withBerth(env: Record<string, string>, body: (service: ServiceProcess) => Promise<void>): Promise<ServiceProcess> {
  const service = await serviceProcess({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0', ...env });
  try {
    await service.start();
    await body(service);
    await service.signal('SIGTERM');
  } finally {
    await service.dispose();
  }
  return service;
}

describe('tracing export', () => {
  let tls: Certificates;
  const receivers: OtlpReceiver[] = [];
  const receiver = async (options: Parameters<typeof startOtlpReceiver>[0] = {}) => {
    const started = await startOtlpReceiver(options);
    receivers.push(started);
    return started;
  };

  before(async () => {
    tls = await certificates();
  });
  after(async () => {
    for (const started of receivers) await started.close();
    if (tls) await rm(tls.dir, { recursive: true, force: true });
  });

  test('a collector\'s base URL (no path) is sent to at /v1/traces, and every export decodes', async () => {
    const collector = await receiver();
    const service = await withBerth({ SERVICE_TRACING_ENDPOINT: collector.url, SERVICE_TRACING_INSECURE: 'true' }, async (berth) => {
      const run = await berth.api('POST', '/run', { prompt: 'say: traced' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
    });
    assert.deepEqual(collector.refused, [], 'no request the collector could not decode, nor to another path');
    assert.ok(collector.exports.length > 0 && collector.exports.every((e) => e.path === '/v1/traces'));
    const spans = collector.spans();
    const request = named(spans, 'POST /run')[0];
    assert.ok(request, `the request span (have: ${[...new Set(spans.map((s) => s.name))].join(', ')})`);
    assert.equal(request.resource['service.name'], 'berth');
    assert.equal(request.resource['service.instance.id'], service.instance);
    assert.equal(request.attributes['http.response.status_code'], 200);
    assert.ok(named(spans, 'berth.run').some((run) => run.parentSpanId === request.spanId && run.traceId === request.traceId), 'the run under its request');
    const logs = logRecords(service);
    assert.equal(logs.find((record) => record.msg === 'exporting traces')?.endpoint, `${collector.url}/v1/traces`, 'the log names the URL used');
    assert.equal(logs.filter((record) => String(record.msg).startsWith('trace export failed')).length, 0);
  });

  test('over TLS the certificate is verified: an unknown CA loses the spans and says so once, not per export', async () => {
    const collector = await receiver({ tls: { key: tls.key, cert: tls.cert } });
    let handshakesRefused = 0;
    collector.onTlsClientError(() => handshakesRefused++);
    const service = await withBerth({ SERVICE_TRACING_ENDPOINT: `${collector.url}/v1/traces` }, async (berth) => {
      // Spans of several batches (one export a second): each export fails its handshake.
      await waitFor('three exports refused', async () => {
        await berth.api('GET', '/version');
        return handshakesRefused >= 3 || undefined;
      }, 30_000, 300);
    });
    assert.equal(collector.exports.length, 0, 'no span crossed an unverified TLS connection');
    const warnings = logRecords(service).filter((record) => String(record.msg).startsWith('trace export failed'));
    assert.equal(warnings.length, 1, `one warning for ${handshakesRefused} failed exports: ${JSON.stringify(warnings)}`);
    assert.equal(warnings[0]!.level, 40, 'a warning');
    assert.equal(warnings[0]!.endpoint, `${collector.url}/v1/traces`);
    assert.match(String(warnings[0]!.error), /certificate/i, 'it says why');
  });

  test('over TLS with a CA the process trusts (NODE_EXTRA_CA_CERTS), the spans arrive and decode', async () => {
    const collector = await receiver({ tls: { key: tls.key, cert: tls.cert } });
    const service = await withBerth({ NODE_EXTRA_CA_CERTS: tls.caFile, SERVICE_TRACING_ENDPOINT: `${collector.url}/v1/traces` }, async (berth) => {
      const run = await berth.api('POST', '/run', { prompt: 'say: over tls' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
    });
    assert.deepEqual(collector.refused, []);
    const spans = collector.spans();
    assert.equal(named(spans, 'POST /run').length, 1, 'the request span');
    assert.ok(named(spans, 'berth.run').length === 1, 'the run span');
    assert.ok(spans.every((span) => span.resource['service.instance.id'] === service.instance));
    assert.doesNotMatch(service.output(), /trace export failed/);
  });

  test('SERVICE_TRACING_SAMPLE_RATIO=0.5 keeps about half of the traces, each whole', async () => {
    const collector = await receiver();
    const requests = 80;
    await withBerth({ SERVICE_TRACING_ENDPOINT: collector.url, SERVICE_TRACING_INSECURE: 'true', SERVICE_TRACING_SAMPLE_RATIO: '0.5' }, async (berth) => {
      for (let i = 0; i < requests; i++) assert.equal((await berth.api('GET', '/version')).status, 200);
    });
    assert.deepEqual(collector.refused, []);
    const kept = named(collector.spans(), 'GET /version');
    // Binomial(80, 0.5): mean 40, standard deviation 4.5; outside 20..60 has a probability below 1e-5.
    assert.ok(kept.length >= 20 && kept.length <= 60, `about half of ${requests} traces kept: ${kept.length}`);
    assert.equal(new Set(kept.map((span) => span.traceId)).size, kept.length, 'one trace per request');
    for (const span of kept) assert.equal(span.parentSpanId, undefined, 'the decision is taken at the root');
  });
});
