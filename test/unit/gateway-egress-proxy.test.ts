// The egress proxy (src/gateway/egress-proxy.ts through startGateway) with real local sockets: an HTTPS
// server with an openssl self-signed certificate and a plain HTTP server stand for outside hosts (names
// mapped to 127.0.0.1 by the tests' resolver override), reached with tls.connect through CONNECT and with
// absolute-form requests. What must be refused is, and the servers never see it.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { lookup as dnsLookup } from 'node:dns/promises';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { MAX_OPEN_PER_RUN } from '../../src/gateway/egress-proxy.js';
import { allowlist, startTestGateway, type TestGateway } from '../support/gateway-doubles.js';

const exec = promisify(execFile);

async function selfSigned(names: readonly string[]): Promise<{ key: Buffer; cert: Buffer }> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-gateway-test-'));
  try {
    await exec('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${names[0]}`,
      '-addext', `subjectAltName=${names.map((name) => `DNS:${name}`).join(',')}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ]);
    return { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function listen(server: HttpServer | HttpsServer | NetServer): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

function basic(token: string): string {
  return `Basic ${Buffer.from(`berth:${token}`).toString('base64')}`;
}

interface ProxyAnswer {
  readonly status: number;
  readonly head: string;
  readonly body: string;
  /** The tunnel, when the proxy answered 200. */
  readonly socket: Socket;
}

/** Sends a CONNECT and reads the proxy's answer: its head, and for a refusal its body up to the close. */
function connectThrough(port: number, target: string, authorization: string | undefined): Promise<ProxyAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('error', reject);
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = received.subarray(0, end).toString();
      const status = Number(head.split(' ')[1]);
      if (status === 200) {
        socket.off('data', onData);
        assert.equal(received.length, end + 4, 'nothing after the 200 before the client speaks');
        return resolve({ status, head, body: '', socket });
      }
      socket.once('end', () => resolve({ status, head, body: received.subarray(end + 4).toString(), socket }));
    };
    socket.on('data', onData);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${authorization ? `Proxy-Authorization: ${authorization}\r\n` : ''}\r\n`);
  });
}

/** A TLS connection over the tunnel, one GET, the whole answer (or the error that ended it). */
function httpsGet(tunnel: Socket, servername: string, ca: Buffer, host = servername): Promise<string> {
  return new Promise((resolve, reject) => {
    const tls: TLSSocket = tlsConnect({ socket: tunnel, servername, ca });
    let text = '';
    tls.on('secureConnect', () => tls.write(`GET /path HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
    tls.on('data', (chunk: Buffer) => (text += chunk.toString()));
    tls.on('end', () => resolve(text));
    tls.on('error', reject);
  });
}

/** Waits for a socket's end (the proxy closing a refused tunnel); answers what arrived before it. */
async function closedBy(socket: Socket): Promise<string> {
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
  socket.on('error', () => undefined);
  await Promise.race([once(socket, 'close'), new Promise((_, reject) => setTimeout(() => reject(new Error('the tunnel stayed open')), 3000))]);
  return text;
}

/** An absolute-form request through the proxy, sent as written (Host header included). */
function plainThrough(port: number, url: string, headers: Record<string, string>): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('error', reject);
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('end', () => {
      const end = text.indexOf('\r\n\r\n');
      resolve({ status: Number(text.split(' ')[1]), head: text.slice(0, end), body: text.slice(end + 4) });
    });
    const fields = Object.entries({ connection: 'close', ...headers }).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.write(`GET ${url} HTTP/1.1\r\n${fields}\r\n`);
  });
}

describe('the egress proxy', () => {
  let gateway: TestGateway;
  let cert: Buffer;
  let https: HttpsServer;
  let http: HttpServer;
  let raw: NetServer;
  let httpsPort: number;
  let httpPort: number;
  let rawPort: number;
  /** What reached the outside servers: `https <sni> <host> <path>`, `http <host> <path> <proxy-authorization?>`, `raw <bytes>`. */
  const reached: string[] = [];

  before(async () => {
    const pair = await selfSigned(['allowed.test', 'other.test', 'a.example.test']);
    cert = pair.cert;
    https = createHttpsServer({ key: pair.key, cert: pair.cert }, (request, response) => {
      reached.push(`https ${(request.socket as TLSSocket).servername} ${request.headers.host} ${request.url}`);
      response.end(`secret of ${request.headers.host}`);
    });
    https.on('tlsClientError', () => undefined);
    http = createHttpServer((request, response) => {
      reached.push(`http ${request.headers.host} ${request.url} ${request.headers['proxy-authorization'] ?? '-'}`);
      response.end(`plain answer for ${request.headers.host}`);
    });
    raw = createNetServer((socket) => {
      socket.on('data', (chunk: Buffer) => reached.push(`raw ${chunk.toString()}`));
      socket.on('error', () => undefined);
    });
    [httpsPort, httpPort, rawPort] = await Promise.all([listen(https), listen(http), listen(raw)]);
    gateway = await startTestGateway({
      resolveOverride: new Map([['allowed.test', '127.0.0.1'], ['other.test', '127.0.0.1'], ['a.example.test', '127.0.0.1'], ['plain.test', '127.0.0.1'], ['raw.test', '127.0.0.1']]),
      // Stands in for DNS for names an attacker controls, resolving to internal addresses; the system's for the others.
      lookup: async (host) => {
        const table: Record<string, string[]> = { 'rebind.test': ['93.184.216.34', '10.89.0.1'], 'metadata.test': ['169.254.169.254'] };
        if (host.endsWith('.invalid')) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
        const found = table[host];
        return found ? found.map((address) => ({ address, family: 4 })) : dnsLookup(host, { all: true });
      },
    });
    gateway.grants.bind('brt_allow', {
      runId: 'run-allow', caller: 'alice', sessionId: 'sess-a',
      policy: allowlist(`allowed.test:${httpsPort}`, `plain.test:${httpPort}`, `raw.test:${rawPort}`, `*.example.test:${httpsPort}`),
    });
    gateway.grants.bind('brt_none', { runId: 'run-none', policy: { mode: 'none' } });
    gateway.grants.bind('brt_open', { runId: 'run-open', policy: { mode: 'open' } });
    gateway.grants.issue('brt_pooled', 'run-pooled');
  });

  after(async () => {
    await gateway.handle.close();
    for (const server of [https, http, raw]) {
      server.close();
      if ('closeAllConnections' in server) server.closeAllConnections();
    }
  });

  beforeEach(() => {
    reached.length = 0;
    gateway.usage.egress.length = 0;
  });

  it('tunnels TLS to an allowed host: the certificate verifies end to end and the decision is recorded', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_allow'));
    assert.equal(answer.status, 200);
    const text = await httpsGet(answer.socket, 'allowed.test', cert);
    assert.match(text, /^HTTP\/1\.1 200/);
    assert.match(text, /secret of allowed\.test/);
    assert.deepEqual(reached, ['https allowed.test allowed.test /path']);
    assert.equal(gateway.usage.egress.length, 1);
    assert.deepEqual({ ...gateway.usage.egress[0], at: 0 }, { at: 0, caller: 'alice', runId: 'run-allow', sessionId: 'sess-a', method: 'CONNECT', host: 'allowed.test', port: httpsPort, decision: 'allowed' });
    assert.equal(await gateway.count('egressRequests', 'allowed'), 1);
  });

  it('the token may be the user or the password of the proxy credentials', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, `Basic ${Buffer.from('brt_allow:').toString('base64')}`);
    assert.equal(answer.status, 200);
    assert.match(await httpsGet(answer.socket, 'allowed.test', cert), /secret of allowed\.test/);
  });

  it('407 with a challenge without credentials, with an unknown token, and with one not yet bound to a run', async () => {
    for (const authorization of [undefined, basic('brt_unknown'), basic('brt_pooled'), 'Bearer brt_allow']) {
      const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, authorization);
      assert.equal(answer.status, 407, String(authorization));
      assert.match(answer.head, /Proxy-Authenticate: Basic realm="berth"/);
      assert.match(answer.body, /^Berth egress proxy: allowed\.test:\d+ refused: /);
    }
    const plain = await plainThrough(gateway.handle.port, `http://plain.test:${httpPort}/`, { host: `plain.test:${httpPort}` });
    assert.equal(plain.status, 407);
    assert.match(plain.head, /proxy-authenticate: Basic realm="berth"/i);
    assert.deepEqual(reached, []);
    assert.equal(await gateway.count('egressRequests', 'refused_credential'), 5);
  });

  it("a host not on the run's allowlist, or on another port: 403 with a message naming host, reason and policy", async () => {
    for (const target of ['evil.test:443', `other.test:${httpsPort}`, `allowed.test:${httpPort}`, 'example.test:443']) {
      const answer = await connectThrough(gateway.handle.port, target, basic('brt_allow'));
      assert.equal(answer.status, 403, target);
      assert.equal(answer.body.split(' refused: ')[0], `Berth egress proxy: ${target}`);
      assert.match(answer.body, /the host is not on this run's allowlist \(container\.network: \{"mode":"allowlist","allow":\["allowed\.test:\d+"/);
    }
    assert.deepEqual(reached, []);
    assert.deepEqual(gateway.usage.egress.map((record) => record.decision), ['refused_host', 'refused_host', 'refused_host', 'refused_host']);
  });

  it('mode none refuses every host', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_none'));
    assert.equal(answer.status, 403);
    assert.match(answer.body, /refused: this run may not reach the network \(container\.network: \{"mode":"none"\}\)/);
    assert.equal(gateway.usage.egress[0]!.decision, 'refused_mode');
  });

  it('raw TCP through CONNECT is refused: the tunnel closes and the host receives nothing', async () => {
    const answer = await connectThrough(gateway.handle.port, `raw.test:${rawPort}`, basic('brt_allow'));
    assert.equal(answer.status, 200);
    answer.socket.write('SSH-2.0-OpenSSH_9.2\r\n');
    await closedBy(answer.socket);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(reached, []);
    assert.equal(gateway.usage.egress[0]!.decision, 'refused_protocol');
    assert.match(gateway.usage.egress[0]!.reason ?? '', /only TLS/);
  });

  it('plain HTTP inside a CONNECT tunnel is refused the same way', async () => {
    const answer = await connectThrough(gateway.handle.port, `plain.test:${httpPort}`, basic('brt_allow'));
    assert.equal(answer.status, 200);
    answer.socket.write(`GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n`);
    await closedBy(answer.socket);
    assert.deepEqual(reached, []);
    assert.equal(gateway.usage.egress[0]!.decision, 'refused_protocol');
  });

  it('a ClientHello for another name than the CONNECT host (SNI mismatch) is refused before the server sees it', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_allow'));
    assert.equal(answer.status, 200);
    const outcome = await httpsGet(answer.socket, 'other.test', cert).catch((error: Error) => error.message);
    assert.doesNotMatch(outcome, /secret/);
    assert.deepEqual(reached, []);
    assert.equal(gateway.usage.egress[0]!.decision, 'refused_sni');
    assert.match(gateway.usage.egress[0]!.reason ?? '', /asks for "other\.test", not allowed\.test/);
  });

  it('a ClientHello without a server name to a named host is refused', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_allow'));
    const tls = tlsConnect({ socket: answer.socket, servername: '', rejectUnauthorized: false });
    tls.on('error', () => undefined);
    await closedBy(answer.socket);
    assert.equal(gateway.usage.egress[0]!.decision, 'refused_sni');
  });

  it('a wildcard pattern admits a subdomain (and the SNI must be that subdomain)', async () => {
    const answer = await connectThrough(gateway.handle.port, `a.example.test:${httpsPort}`, basic('brt_allow'));
    assert.equal(answer.status, 200);
    assert.match(await httpsGet(answer.socket, 'a.example.test', cert), /secret of a\.example\.test/);
  });

  it('a name that does not resolve: 502 failed', async () => {
    const answer = await connectThrough(gateway.handle.port, 'nowhere.invalid:443', basic('brt_open'));
    assert.equal(answer.status, 502);
    assert.match(answer.body, /refused: nowhere\.invalid cannot be resolved \(ENOTFOUND\)/);
    assert.equal(gateway.usage.egress[0]!.decision, 'failed');
  });

  it('internal addresses are refused after resolution, even in mode open: literals, names resolving there, and localhost by real DNS', async () => {
    for (const target of ['127.0.0.1:443', '169.254.169.254:80', '[::1]:443', '10.89.0.1:8788', 'rebind.test:443', 'metadata.test:80', 'localhost:443']) {
      const answer = await connectThrough(gateway.handle.port, target, basic('brt_open'));
      assert.equal(answer.status, 403, target);
      assert.match(answer.body, /an internal address/, target);
    }
    assert.ok(gateway.usage.egress.every((record) => record.decision === 'refused_address'));
    assert.match(gateway.usage.egress.find((record) => record.host === 'rebind.test')!.reason ?? '', /rebind\.test resolves to 10\.89\.0\.1/);
  });

  it('the resolver override stands for outside hosts only for the names it holds, in mode open too', async () => {
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_open'));
    assert.equal(answer.status, 200);
    assert.match(await httpsGet(answer.socket, 'allowed.test', cert), /secret of allowed\.test/);
    const direct = await connectThrough(gateway.handle.port, `127.0.0.1:${httpsPort}`, basic('brt_open'));
    assert.equal(direct.status, 403, 'the address the override maps to is not reachable by itself');
  });

  it('a host that does not answer the connection: 502 failed', async () => {
    const probe = createNetServer();
    const port = await listen(probe);
    await new Promise((resolve) => probe.close(resolve));
    const grants = gateway.grants;
    grants.bind('brt_closed', { runId: 'run-closed', policy: allowlist(`allowed.test:${port}`) });
    const answer = await connectThrough(gateway.handle.port, `allowed.test:${port}`, basic('brt_closed'));
    assert.equal(answer.status, 502);
    assert.match(answer.body, /ECONNREFUSED/);
    assert.equal(gateway.usage.egress[0]!.decision, 'failed');
  });

  describe('plain HTTP', () => {
    it('is forwarded to an allowed host with its Host header and without the proxy credentials', async () => {
      const answer = await plainThrough(gateway.handle.port, `http://plain.test:${httpPort}/simple/pkg/?q=1`, { host: `plain.test:${httpPort}`, 'proxy-authorization': basic('brt_allow') });
      assert.equal(answer.status, 200);
      assert.match(answer.body, new RegExp(`plain answer for plain\\.test:${httpPort}`));
      assert.deepEqual(reached, [`http plain.test:${httpPort} /simple/pkg/?q=1 -`]);
      assert.equal(gateway.usage.egress[0]!.method, 'HTTP');
      assert.equal(gateway.usage.egress[0]!.decision, 'allowed');
    });

    it("a Host header naming another host than the URL's is refused, and nothing is sent", async () => {
      const answer = await plainThrough(gateway.handle.port, `http://plain.test:${httpPort}/`, { host: `internal.example:${httpPort}`, 'proxy-authorization': basic('brt_allow') });
      assert.equal(answer.status, 403);
      assert.match(answer.body, /refused: the Host header \("internal\.example:\d+"\) does not name the URL's host/);
      assert.deepEqual(reached, []);
      assert.equal(gateway.usage.egress[0]!.decision, 'refused_host');
    });

    it('a host not on the list and an internal address are refused like CONNECT', async () => {
      const listed = await plainThrough(gateway.handle.port, 'http://evil.test/', { host: 'evil.test', 'proxy-authorization': basic('brt_allow') });
      assert.equal(listed.status, 403);
      const internal = await plainThrough(gateway.handle.port, 'http://169.254.169.254/latest/meta-data/', { host: '169.254.169.254', 'proxy-authorization': basic('brt_open') });
      assert.equal(internal.status, 403);
      assert.match(internal.body, /169\.254\.169\.254 is an internal address/);
      assert.deepEqual(gateway.usage.egress.map((record) => record.decision), ['refused_host', 'refused_address']);
    });

    it('an https:// URL in absolute form is refused: HTTPS goes through CONNECT', async () => {
      const answer = await plainThrough(gateway.handle.port, `https://allowed.test:${httpsPort}/`, { host: `allowed.test:${httpsPort}`, 'proxy-authorization': basic('brt_allow') });
      assert.equal(answer.status, 400);
      assert.equal(gateway.usage.egress[0]!.decision, 'refused_protocol');
    });
  });

  it(`one run holds at most ${MAX_OPEN_PER_RUN} connections through the proxy; closed ones free their place`, async () => {
    const tunnels: Socket[] = [];
    try {
      for (let index = 0; index < MAX_OPEN_PER_RUN; index++) {
        const answer = await connectThrough(gateway.handle.port, `raw.test:${rawPort}`, basic('brt_allow'));
        assert.equal(answer.status, 200, `tunnel ${index}`);
        tunnels.push(answer.socket);
      }
      const refused = await connectThrough(gateway.handle.port, `raw.test:${rawPort}`, basic('brt_allow'));
      assert.equal(refused.status, 429);
      assert.match(refused.body, /this run has \d+ connections open through the proxy already/);
      const other = await connectThrough(gateway.handle.port, `allowed.test:${httpsPort}`, basic('brt_open'));
      assert.equal(other.status, 200, "another run's are its own");
      other.socket.destroy();
      const closed = tunnels.pop()!;
      closed.destroy();
      // The proxy sees the close, then its upstream side closes and frees the place.
      for (let waited = 0; ; waited += 10) {
        const again = await connectThrough(gateway.handle.port, `raw.test:${rawPort}`, basic('brt_allow'));
        if (again.status === 200) {
          tunnels.push(again.socket);
          break;
        }
        assert.ok(waited < 2000, 'a closed tunnel freed its place');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      for (const tunnel of tunnels) tunnel.destroy();
    }
  });

  it("a run's open tunnels are closed once its credential is revoked; other runs' stay open", async () => {
    const own = await startTestGateway({ resolveOverride: new Map([['allowed.test', '127.0.0.1']]), revocationSweepMs: 50 });
    try {
      own.grants.bind('brt_ending', { runId: 'run-ending', policy: allowlist(`allowed.test:${httpsPort}`) });
      own.grants.bind('brt_staying', { runId: 'run-staying', policy: allowlist(`allowed.test:${httpsPort}`) });
      const tunnels = await Promise.all(['brt_ending', 'brt_staying'].map(async (token) => {
        const answer = await connectThrough(own.handle.port, `allowed.test:${httpsPort}`, basic(token));
        const tls = tlsConnect({ socket: answer.socket, servername: 'allowed.test', ca: cert });
        tls.on('error', () => undefined);
        await once(tls, 'secureConnect');
        return answer.socket;
      }));
      const ended = closedBy(tunnels[0]!);
      own.grants.revoke('brt_ending');
      await ended;
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(tunnels[1]!.destroyed, false);
      tunnels[1]!.destroy();
    } finally {
      await own.handle.close();
    }
  });

  it('closing the gateway ends open tunnels', async () => {
    const own = await startTestGateway({ resolveOverride: new Map([['allowed.test', '127.0.0.1']]) });
    own.grants.bind('brt_t', { runId: 'run-t', policy: allowlist(`allowed.test:${httpsPort}`) });
    const answer = await connectThrough(own.handle.port, `allowed.test:${httpsPort}`, basic('brt_t'));
    const tls = tlsConnect({ socket: answer.socket, servername: 'allowed.test', ca: cert });
    tls.on('error', () => undefined);
    await once(tls, 'secureConnect');
    const closed = closedBy(answer.socket);
    await own.handle.close();
    await closed;
  });
});
