// Finding 10, performed against a real Berth on real Podman: a caller points webhook_url at loopback, a
// private or metadata address, or at a name that resolves to one. Refused at submission (400); and a
// receiver on an allowed address still gets its delivery.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';

describe('webhook destinations', () => {
  let strict: TestBerth;
  let receiver: Server;
  let port: number;
  const delivered: string[] = [];

  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        delivered.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    port = (receiver.address() as AddressInfo).port;
    // The default: SERVICE_WEBHOOK_ALLOWED_HOSTS unset.
    strict = await startTestBerth();
  });
  after(async () => {
    await strict?.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  test('internal destinations are refused at submission, whatever their spelling, before any container', async () => {
    for (const url of [
      `http://127.0.0.1:${port}/hook`,
      `http://localhost:${port}/hook`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.1.2.3/x',
      'http://[::1]/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
      'http://172.16.0.1/x',
      'http://192.168.1.1/x',
      'http://100.64.0.1/x',
      'http://255.255.255.255/x',
      'http://[fe80::1]/x',
      'http://[fd00::1]/x',
      'http://0.0.0.0/x',
      'http://2130706433/x',
    ]) {
      const response = await strict.request('POST', '/run/async', { prompt: 'say: x', webhook_url: url });
      assert.equal(response.status, 400, `${url}: ${JSON.stringify(response.body)}`);
      assert.match(response.body.error, /webhook_url/);
    }
    assert.deepEqual(await strict.leftovers(), []);
    assert.deepEqual((await strict.request('GET', '/jobs')).body.jobs, [], 'no job was stored');
    assert.deepEqual(delivered, []);
  });

  test('with SERVICE_WEBHOOK_ALLOWED_HOSTS naming the receiver, it gets its delivery; metadata stays refused', async () => {
    const allowing = await startTestBerth({ SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' });
    try {
      const metadata = await allowing.request('POST', '/run/async', { prompt: 'say: x', webhook_url: 'http://169.254.169.254/latest/meta-data/' });
      assert.equal(metadata.status, 400);
      const job = await allowing.request('POST', '/run/async', { prompt: 'say: delivered', webhook_url: `http://127.0.0.1:${port}/hook` });
      assert.equal(job.status, 200, JSON.stringify(job.body));
      for (let i = 0; delivered.length === 0; i++) {
        assert.ok(i < 120, 'the webhook arrives');
        await delay(250);
      }
      assert.match(delivered[0]!, /"job_id":"job-/);
    } finally {
      await allowing.stop();
    }
  });
});
