// How Berth reaches the model, as an upstream sees it (issue 28): a credentials file read at start
// (SERVICE_ENGINE_CREDENTIALS_FILE), sent as `x-api-key` or, with SERVICE_ENGINE_CREDENTIAL_KIND=oauth_token,
// as `Authorization: Bearer` with the OAuth beta flag; and a Berth with no model at all answers 503 to
// work and creates nothing. The upstream is a recording proxy in front of a real offline model that
// accepts only the file's value, so the real engine's run succeeds only when the gateway sent it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';
import { modelUrlFromHost, startTestBerth, type TestBerth } from '../support/berth.js';

const OAUTH_BETA = 'oauth-2025-04-20';

interface RecordingUpstream {
  readonly port: number;
  /** Headers of every /v1/messages request that reached the upstream. */
  readonly messages: IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** Forwards everything to `targetPort` unchanged, keeping the request headers of each model request. */
async function recordingUpstream(targetPort: number): Promise<RecordingUpstream> {
  const messages: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/v1/messages')) messages.push(req.headers);
    const forward = httpRequest({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    messages,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

describe('a credentials file', () => {
  const token = `sk-ant-oat01-test-${randomBytes(16).toString('hex')}`;
  let dir: string;
  let file: string;
  let model: OfflineModel;
  let upstream: RecordingUpstream;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-credentials-'));
    file = join(dir, 'model-credential');
    // A trailing newline, as editors leave one: Berth trims it.
    await writeFile(file, `${token}\n`, { mode: 0o600 });
    model = await startOfflineModel({ host: '127.0.0.1', port: 0, apiKey: token });
    upstream = await recordingUpstream(model.port);
  });
  after(async () => {
    await upstream?.close();
    await model?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function withBerth(kind: 'api_key' | 'oauth_token' | undefined, body: (t: TestBerth) => Promise<void>): Promise<void> {
    const t = await startTestBerth({
      SERVICE_OFFLINE_MODEL: 'false',
      SERVICE_ENGINE_CREDENTIALS_FILE: file,
      SERVICE_ENGINE_BASE_URL: modelUrlFromHost(upstream.port),
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
      ...(kind === undefined ? {} : { SERVICE_ENGINE_CREDENTIAL_KIND: kind }),
    });
    try {
      await body(t);
    } finally {
      await t.stop();
    }
  }

  test('with SERVICE_ENGINE_CREDENTIAL_KIND=oauth_token the upstream gets Authorization: Bearer and the OAuth beta flag', async () => {
    await withBerth('oauth_token', async (t) => {
      const status = await t.request('GET', '/claude/status');
      assert.equal(status.body.configured, true);
      assert.ok(String(status.body.message).includes(file), `the file is named: ${status.body.message}`);
      upstream.messages.length = 0;
      const run = await t.request('POST', '/run', { prompt: 'say: through the file' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(run.body.output, 'through the file');
      assert.ok(upstream.messages.length > 0, 'the engine\'s requests reached the configured upstream');
      for (const headers of upstream.messages) {
        assert.equal(headers.authorization, `Bearer ${token}`);
        assert.equal(headers['x-api-key'], undefined, 'no x-api-key beside the bearer token');
        const betas = String(headers['anthropic-beta'] ?? '').split(',').map((beta) => beta.trim());
        assert.ok(betas.includes(OAUTH_BETA), `anthropic-beta names ${OAUTH_BETA}: ${headers['anthropic-beta']}`);
      }
      assert.deepEqual(await t.leftovers(), []);
    });
  });

  test('by default (api_key) the upstream gets the file\'s value as x-api-key, and no bearer token', async () => {
    await withBerth(undefined, async (t) => {
      upstream.messages.length = 0;
      const run = await t.request('POST', '/run', { prompt: 'say: as a key' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.ok(upstream.messages.length > 0);
      for (const headers of upstream.messages) {
        assert.equal(headers['x-api-key'], token);
        assert.equal(headers.authorization, undefined);
        assert.ok(!String(headers['anthropic-beta'] ?? '').includes(OAUTH_BETA));
      }
    });
  });
});

test('with no model configured (no file, no secret, no offline model) work is refused with 503 and nothing is created', async () => {
  const t = await startTestBerth({ SERVICE_OFFLINE_MODEL: 'false', SERVICE_POOL_SIZE: '1', SERVICE_AGENT_POOL_SIZE: '1' });
  try {
    const status = await t.request('GET', '/claude/status');
    assert.equal(status.body.configured, false);
    const refusals = [
      await t.request('POST', '/run', { prompt: 'say: nobody answers' }),
      await t.request('POST', '/run/async', { prompt: 'say: nobody answers' }),
      await t.request('GET', `/run/stream?prompt=${encodeURIComponent('say: nobody answers')}`),
      await t.request('POST', '/agents', {}),
    ];
    for (const refused of refusals) {
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.status, 'error');
      assert.match(refused.body.error, /engine not configured: no credentials/);
    }
    const containers = await t.berth.runtime.listContainers(`berth.instance=${t.config.instanceName}`);
    assert.deepEqual(containers.map((c) => c.names[0]), [], 'neither runs nor a pool of engines without a model');
  } finally {
    await t.stop();
  }
});
