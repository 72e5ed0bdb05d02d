// Local servers standing for hosts outside this machine, for the egress tests (issue 25). There is no
// internet here: names such as `allowed.test` are mapped to 127.0.0.1 through the test Berth's resolver
// override (startTestBerth's `egressHosts`), used only by the egress proxy, so a run reaches them only
// through the proxy, never directly (127.0.0.1 in a container is the container itself).
//
// One plain HTTP server and one HTTPS server (self-signed, made with openssl at test time, valid for every
// name) serve all names, as a CDN does: what answered and for which name is in the body, and every request
// and TLS handshake is recorded, so a test also sees that a refused host was never contacted.
// `info/refs` answers git's dumb protocol, so `git ls-remote` (the TLS client the agent image has) works.
// A host trap (TCP and UDP on every address) records anything that reaches the host on a port no
// container is meant to reach; captured ClientHellos let a test speak TLS with any SNI from bash.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, createSecureContext, type SecureContext, type TLSSocket } from 'node:tls';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** The commit id `git ls-remote` prints for every outside repository. */
export const OUTSIDE_COMMIT = '0123456789abcdef0123456789abcdef01234567';

export interface OutsideRequest {
  readonly scheme: 'http' | 'https';
  /** The Host header as the server got it. */
  readonly host: string;
  readonly path: string;
  /** The TLS server name of the connection (https only; undefined without SNI). */
  readonly sni?: string;
}

export interface OutsideHosts {
  /** Every name → 127.0.0.1: what the test Berth's egress proxy resolves them to. */
  readonly addresses: ReadonlyMap<string, string>;
  readonly httpPort: number;
  readonly httpsPort: number;
  /** `http://name:port` of the plain server, or `https://name:port` of the TLS one. */
  url(scheme: 'http' | 'https', name: string): string;
  /** Every request that reached a server, in order. */
  readonly requests: OutsideRequest[];
  /** The server name of every ClientHello with SNI that reached the HTTPS server, in order. */
  readonly serverNames: string[];
  /** The bytes of a TLS ClientHello for `servername` (undefined: without SNI), as a TLS client sends them. */
  clientHello(servername: string | undefined): Promise<Buffer>;
  /** Requests whose Host header names `name` (any port). */
  seen(name: string): OutsideRequest[];
  close(): Promise<void>;
}

function answer(scheme: 'http' | 'https', requests: OutsideRequest[], request: IncomingMessage, response: ServerResponse): void {
  const host = request.headers.host ?? '';
  const path = request.url ?? '/';
  const sni = scheme === 'https' ? ((request.socket as TLSSocket).servername || undefined) : undefined;
  requests.push({ scheme, host, path, ...(sni === undefined ? {} : { sni }) });
  if (path.endsWith('/info/refs') || path.includes('/info/refs?')) {
    // git's dumb protocol: a text/plain refs list is all ls-remote needs.
    send(response, `${OUTSIDE_COMMIT}\trefs/heads/main\n`);
    return;
  }
  send(response, `outside-host ${scheme} host=${host} path=${path}\n`);
}

/** A plain-text answer with its length (not chunked: a probe prints the body as it came). */
function send(response: ServerResponse, text: string): void {
  response.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** A self-signed certificate for every name (subjectAltName), valid one day. */
async function selfSigned(names: readonly string[]): Promise<{ key: Buffer; cert: Buffer }> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-outside-'));
  try {
    const san = names.map((name) => `DNS:${name}`).join(',');
    await exec('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${names[0] ?? 'outside.test'}`,
      '-addext', `subjectAltName=${san}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ]);
    return { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function listen(server: HttpServer | NetServer, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** Closes a server and every connection it still has. */
function closeServer(server: HttpServer | NetServer, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}

function tracked(server: HttpServer | NetServer, event: 'connection' | 'secureConnection' = 'connection'): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on(event, (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  return sockets;
}

/** Captures the first TLS record(s) a client sends: its whole ClientHello (5-byte headers give each record's length). */
function captureClientHello(servername: string | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const server = createNetServer((socket) => {
      let bytes = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        bytes = Buffer.concat([bytes, chunk]);
        // The ClientHello of a fresh connection fits one record (under 16 KiB); wait for all of it.
        if (bytes.length >= 5 && bytes.length >= 5 + bytes.readUInt16BE(3)) {
          socket.destroy();
          server.close();
          resolve(bytes.subarray(0, 5 + bytes.readUInt16BE(3)));
        }
      });
      socket.on('error', () => undefined);
    });
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      // An empty servername sends no SNI extension at all.
      const client = tlsConnect({ host: '127.0.0.1', port, servername: servername ?? '', rejectUnauthorized: false });
      client.on('error', () => undefined);
    });
  });
}

export async function startOutsideHosts(names: readonly string[]): Promise<OutsideHosts> {
  const requests: OutsideRequest[] = [];
  const serverNames: string[] = [];
  const http = createHttpServer((request, response) => answer('http', requests, request, response));
  const httpSockets = tracked(http);
  const { key, cert } = await selfSigned(names);
  const context = createSecureContext({ key, cert });
  const SNICallback = (servername: string, done: (error: Error | null, context: SecureContext) => void) => {
    serverNames.push(servername);
    done(null, context);
  };
  const https = createHttpsServer({ key, cert, SNICallback }, (request, response) => answer('https', requests, request, response));
  const httpsSockets = tracked(https);
  const httpPort = await listen(http, '127.0.0.1');
  const httpsPort = await listen(https, '127.0.0.1');
  return {
    addresses: new Map(names.map((name) => [name, '127.0.0.1'])),
    httpPort,
    httpsPort,
    url: (scheme, name) => `${scheme}://${name}:${scheme === 'http' ? httpPort : httpsPort}`,
    requests,
    serverNames,
    clientHello: captureClientHello,
    seen: (name) => requests.filter((request) => request.host.replace(/:\d+$/, '') === name),
    async close() {
      await Promise.all([closeServer(http, httpSockets), closeServer(https, httpsSockets)]);
    },
  };
}

export interface HostTrap {
  /** The TCP and UDP port (the same number) the trap listens on, on every address of the host. */
  readonly port: number;
  /** What reached it: `tcp <remote address>` or `udp <remote address> <text>`. */
  readonly contacts: string[];
  close(): Promise<void>;
}

/**
 * A TCP listener and a UDP receiver on every address of the host, on one port number: a host service no
 * container may reach (the agent network's gateway address is the host's own, so only nftables keeps it
 * out). Each contact is recorded; a TCP one is answered `host-trap`.
 */
export async function startHostTrap(): Promise<HostTrap> {
  const contacts: string[] = [];
  const tcp = createNetServer((socket) => {
    contacts.push(`tcp ${socket.remoteAddress}`);
    socket.on('error', () => undefined);
    socket.end('host-trap\n');
  });
  const sockets = tracked(tcp);
  // Take a TCP port, then the same UDP port; retry if that UDP port happens to be taken.
  for (let attempt = 0; ; attempt++) {
    const port = await listen(tcp, '0.0.0.0');
    const udp: UdpSocket = createSocket('udp4');
    const bound = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, '0.0.0.0', () => resolve(true));
    });
    if (!bound) {
      udp.close();
      await new Promise((resolve) => tcp.close(resolve));
      if (attempt > 5) throw new Error('no free TCP+UDP port for the host trap');
      continue;
    }
    udp.on('message', (message, remote) => contacts.push(`udp ${remote.address} ${message.toString('utf8').trim()}`));
    return {
      port,
      contacts,
      async close() {
        udp.close();
        await closeServer(tcp, sockets);
      },
    };
  }
}

/**
 * Bash functions a run's commands use to try the ways out of its container (the agent image has bash,
 * coreutils and git, no curl). Each prints one line `<label> <result>`, so a test finds every result in
 * the run's output by its label:
 *  - `http LABEL URL [HOST [AUTH]]`: a plain request through the proxy (HTTP_PROXY, its credential as
 *    Proxy-Authorization unless AUTH is given; "-" sends none): the status line and the first bytes of the body;
 *  - `tunnel LABEL HOST:PORT PAYLOAD_BASE64`: CONNECT through the proxy, then the payload (e.g. a
 *    ClientHello): the CONNECT answer and the first 5 bytes that came back through the tunnel, in hex;
 *  - `tcp LABEL HOST PORT`: a direct TCP connection, no proxy (OPEN or closed);
 *  - `udp LABEL HOST PORT`: three datagrams, no proxy (the host side records what arrives);
 *  - `dns LABEL SERVER`: a DNS query over UDP (ANSWERED or silent);
 *  - `model LABEL KEY [CHARS]`: a Messages API request to ANTHROPIC_BASE_URL with that key (and a prompt of
 *    CHARS characters, to spend): the status line and the start of the answer.
 */
const PROBES = readFileSync(join(import.meta.dirname, 'egress-probes.sh'), 'utf8');

/**
 * A `run:` directive line for the offline model: the probe functions defined, then `commands` (shell,
 * `;`-separated), then `probes-done`. The functions travel base64-encoded so the line stays one line.
 */
export function probeRun(...commands: string[]): string {
  const encoded = Buffer.from(PROBES).toString('base64');
  return `run: eval "$(printf %s ${encoded} | base64 -d)"; ${commands.join('; ')}; echo probes-done`;
}

/** The result a probe printed for `label` in a run's output (the rest of its line), or undefined. */
export function probeResult(output: string, label: string): string | undefined {
  const escaped = label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped} (.*)$`, 'm').exec(output)?.[1];
}

/** The result a probe printed for `label`; fails, showing the whole output, when the probe printed nothing. */
export function requireProbeResult(output: string, label: string): string {
  const found = probeResult(output, label);
  assert.ok(found !== undefined, `probe ${label} printed its result:\n${output}`);
  return found;
}
