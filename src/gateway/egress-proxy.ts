// The only way out of an agent container: an HTTP proxy (HTTP_PROXY / HTTPS_PROXY inside the container) that
// lets a run reach the hosts its container.network admits and nothing else. Each request names its run by the
// per-run credential in Proxy-Authorization; the host must pass the run's policy, then every address it
// resolves to must be an outside one (not loopback, private, link-local, metadata or Berth's own), and the
// proxy connects to exactly the address it checked. Through CONNECT only TLS passes, and only a ClientHello
// asking for the host the CONNECT named; a plain HTTP request must name the same host in its URL and its
// Host header. Every decision is counted, logged and recorded with the run's usage.
import { request as httpRequest, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, isIP, type BlockList, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EgressDecision, GrantHolder, GrantLookup, UsageRecorder } from '../core/gateway/gateway-types.js';
import { describePolicy, normalHost, policyAdmits } from '../egress-policy.js';
import { bareHost } from '../internal-addresses.js';
import type { Metrics } from '../metrics/metrics.js';
import { parseClientHello, type ClientHelloResult } from './client-hello.js';
import { resolveDestination, type HostLookup } from './destination.js';
import { endToEndHeaders, holderIds } from './model-forward.js';

export interface EgressProxyOptions {
  readonly grants: GrantLookup;
  readonly usage: UsageRecorder;
  readonly metrics: Pick<Metrics, 'egressRequests'>;
  readonly log: (details: Record<string, unknown>, message: string) => void;
  /** Tests only: host name → address standing for an outside host (see destination.ts). */
  readonly resolveOverride?: ReadonlyMap<string, string> | undefined;
  readonly lookup?: HostLookup;
  /** The host's own addresses (destination.ts ownAddresses()). */
  readonly own: () => BlockList;
  /** How often open connections are closed whose run ended (default 10 s). */
  readonly revocationSweepMs?: number;
}

export interface EgressProxy {
  /** A CONNECT request (the server's `connect` event). */
  connect(request: IncomingMessage, client: Duplex, head: Buffer): void;
  /** A plain HTTP request in absolute form (`GET http://host/path`). */
  request(request: IncomingMessage, response: ServerResponse): void;
  /** Ends every open tunnel and forwarded request. */
  close(): void;
}

/** How long and how much of a tunnel's first bytes are read to find the ClientHello. */
export const HELLO_TIMEOUT_MS = 10_000;
export const MAX_HELLO_BYTES = 16 * 1024;
/** Connecting to an outside host: longer than any reachable host needs. */
const CONNECT_TIMEOUT_MS = 15_000;
/**
 * Connections one run may hold open through the proxy at once: far above what a package manager opens
 * (npm: 15 sockets per host), far below what would run Berth out of file descriptors for every other run.
 */
export const MAX_OPEN_PER_RUN = 256;
/** How often open connections are checked against their run's credential. */
const REVOCATION_SWEEP_MS = 10_000;

type Method = 'CONNECT' | 'HTTP';

/** A refusal or failure answered to the client: status, decision and the text it shows. */
interface Refusal {
  readonly status: number;
  readonly decision: Exclude<EgressDecision, 'allowed'>;
  readonly reason: string;
}

/** A request's run, and the token that named it (checked again while its connections stay open). */
interface Credential {
  readonly holder: GrantHolder;
  readonly token: string;
}

/** The run a Proxy-Authorization names: `Basic base64(user:token)`, the token being the password or the user. */
function credentialOf(request: IncomingMessage, grants: GrantLookup): Credential | Refusal {
  const header = request.headers['proxy-authorization'];
  const encoded = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '')?.[1];
  if (encoded === undefined) return { status: 407, decision: 'refused_credential', reason: 'proxy credentials are required (HTTP_PROXY carries them)' };
  const text = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  const candidates = colon === -1 ? [text] : [text.slice(colon + 1), text.slice(0, colon)];
  for (const token of candidates) {
    if (token === '') continue;
    const grant = grants.lookup(token);
    if (grant?.state === 'bound') return { holder: grant.holder, token };
  }
  return { status: 407, decision: 'refused_credential', reason: 'this credential is not valid: the run it belonged to has ended' };
}

function isRefusal(value: Credential | Refusal): value is Refusal {
  return 'decision' in value;
}

/** `host:port` of a CONNECT, `[v6]:port` included; undefined when it is not one. */
export function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: normalHost(bareHost(match[1]!)), port };
}

/** A plain-text answer on a raw socket (CONNECT's). */
function writeRaw(socket: Duplex, status: number, statusText: string, body: string, extra: string[] = []): void {
  if (socket.destroyed) return;
  const payload = Buffer.from(`${body}\n`, 'utf8');
  const head = [`HTTP/1.1 ${status} ${statusText}`, ...extra, 'Content-Type: text/plain; charset=utf-8', `Content-Length: ${payload.length}`, 'Connection: close', '', ''].join('\r\n');
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), payload]));
  // The server's sockets may stay half-open: a client that never closes its side does not keep it.
  setTimeout(() => socket.destroy(), 10_000).unref();
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 407: 'Proxy Authentication Required', 429: 'Too Many Requests', 502: 'Bad Gateway' };
const CHALLENGE = 'Proxy-Authenticate: Basic realm="berth"';

export function egressProxy(options: EgressProxyOptions): EgressProxy {
  const { metrics, log } = options;
  /** Every outgoing connection, with the credential it was opened with. */
  const open = new Map<{ destroy(): void }, Credential>();
  const openPerRun = new Map<string, number>();

  /** Keeps an outgoing socket or request, counted against its run's limit, to be ended by close() or the run's end. */
  function track<T extends { destroy(): void; once(event: 'close', listener: () => void): unknown }>(thing: T, credential: Credential): T {
    const { runId } = credential.holder;
    open.set(thing, credential);
    openPerRun.set(runId, (openPerRun.get(runId) ?? 0) + 1);
    thing.once('close', () => {
      open.delete(thing);
      const left = (openPerRun.get(runId) ?? 1) - 1;
      if (left > 0) openPerRun.set(runId, left);
      else openPerRun.delete(runId);
    });
    return thing;
  }

  // A tunnel outlives the request that opened it: once its run ended (its token revoked), it is closed too,
  // so a run's credential buys nothing after the run, not even a connection it opened before.
  const sweep = setInterval(() => {
    for (const [thing, { token }] of open) {
      if (options.grants.lookup(token)?.state !== 'bound') thing.destroy();
    }
  }, options.revocationSweepMs ?? REVOCATION_SWEEP_MS);
  sweep.unref();

  /** Checked right before each outgoing connection is made (synchronously with it, so bursts cannot slip past). */
  function tooManyOpen(holder: GrantHolder): Refusal | undefined {
    if ((openPerRun.get(holder.runId) ?? 0) < MAX_OPEN_PER_RUN) return undefined;
    return { status: 429, decision: 'failed', reason: `this run has ${MAX_OPEN_PER_RUN} connections open through the proxy already` };
  }

  function note(method: Method, host: string, port: number, decision: EgressDecision, holder: GrantHolder | undefined, reason?: string): void {
    metrics.egressRequests.inc({ decision });
    log({ runId: holder?.runId, caller: holder?.caller, method, host, port, decision, ...(reason === undefined ? {} : { reason }) }, `egress: ${decision} ${method} ${host}:${port}`);
    if (!holder) return;
    // Not awaited: the decision is acted on at once, whatever the store does with its record.
    options.usage.recordEgress({
      at: Date.now(), caller: holder.caller, runId: holder.runId, ...holderIds(holder),
      method, host, port, decision, ...(reason === undefined ? {} : { reason }),
    }).catch((error: unknown) => log({ runId: holder.runId, err: error }, 'egress: recording a decision failed'));
  }

  /** The text a client shows for a refusal: which host, why, and the run's policy. */
  function message(host: string, port: number, reason: string, holder: GrantHolder | undefined): string {
    const policy = holder ? ` (container.network: ${JSON.stringify(describePolicy(holder.policy))})` : '';
    return `Berth egress proxy: ${host}:${port} refused: ${reason}${policy}`;
  }

  /** The policy's and the resolver's verdict: the pinned address to connect to, or a refusal. */
  async function judge(holder: GrantHolder, host: string, port: number): Promise<{ address: string } | Refusal> {
    if (holder.policy.mode === 'none') return { status: 403, decision: 'refused_mode', reason: 'this run may not reach the network' };
    if (!policyAdmits(holder.policy, host, port)) return { status: 403, decision: 'refused_host', reason: "the host is not on this run's allowlist" };
    const destination = await resolveDestination(host, { override: options.resolveOverride, own: options.own, ...(options.lookup ? { lookup: options.lookup } : {}) });
    if (!destination.ok) return { status: destination.decision === 'failed' ? 502 : 403, decision: destination.decision, reason: destination.reason };
    return { address: destination.address };
  }

  /** Reads the tunnel's first bytes until they show a ClientHello's server name, or show they cannot. */
  function readClientHello(client: Duplex, head: Buffer): Promise<{ readonly hello: ClientHelloResult | 'timeout' | 'closed'; readonly bytes: Buffer }> {
    return new Promise((resolve) => {
      let seen = head;
      let timer: NodeJS.Timeout | undefined;
      const verdict = (): ClientHelloResult | undefined => {
        const result = parseClientHello(seen);
        if (result !== 'need-more') return result;
        return seen.length >= MAX_HELLO_BYTES ? 'not-tls' : undefined;
      };
      const finish = (hello: ClientHelloResult | 'timeout' | 'closed'): void => {
        clearTimeout(timer);
        client.off('data', onData);
        client.off('close', onClose);
        client.off('end', onClose);
        client.pause();
        resolve({ hello, bytes: seen });
      };
      const onData = (chunk: Buffer): void => {
        seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
        const result = verdict();
        if (result !== undefined) finish(result);
      };
      const onClose = (): void => finish('closed');
      const first = verdict();
      if (first !== undefined) return resolve({ hello: first, bytes: seen });
      timer = setTimeout(() => finish('timeout'), HELLO_TIMEOUT_MS);
      client.on('data', onData);
      // The server's sockets are half-open capable: a client's FIN alone ends the wait.
      client.once('end', onClose);
      client.once('close', onClose);
      client.resume();
    });
  }

  /** Why a tunnel's first bytes may not pass to `host`, or undefined when they may. */
  function helloRefusal(hello: ClientHelloResult | 'timeout' | 'closed', host: string): { decision: 'refused_protocol' | 'refused_sni'; reason: string } | undefined {
    if (hello === 'timeout') return { decision: 'refused_protocol', reason: `no TLS ClientHello within ${HELLO_TIMEOUT_MS / 1000} s` };
    if (hello === 'closed') return { decision: 'refused_protocol', reason: 'the client closed the tunnel before a TLS ClientHello' };
    if (hello === 'not-tls' || hello === 'need-more') return { decision: 'refused_protocol', reason: 'only TLS passes a CONNECT tunnel (raw TCP is refused)' };
    // Clients send no SNI for an address (RFC 6066): the connection goes to that very address anyway.
    if (hello === 'no-sni') return isIP(host) !== 0 ? undefined : { decision: 'refused_sni', reason: 'the TLS ClientHello names no server (SNI)' };
    if (normalHost(hello.sni) !== host) return { decision: 'refused_sni', reason: `the TLS ClientHello asks for "${hello.sni}", not ${host}` };
    return undefined;
  }

  async function connectTunnel(request: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy());
    const target = parseAuthority(request.url ?? '');
    const credential = credentialOf(request, options.grants);
    if (isRefusal(credential)) {
      note('CONNECT', target?.host ?? String(request.url), target?.port ?? 0, credential.decision, undefined, credential.reason);
      writeRaw(client, 407, STATUS_TEXT[407]!, message(target?.host ?? String(request.url), target?.port ?? 0, credential.reason, undefined), [CHALLENGE]);
      return;
    }
    const { holder } = credential;
    if (!target) {
      const reason = `"${request.url}" is not host:port`;
      note('CONNECT', String(request.url), 0, 'refused_protocol', holder, reason);
      writeRaw(client, 400, STATUS_TEXT[400]!, `Berth egress proxy: CONNECT ${reason}`);
      return;
    }
    const { host, port } = target;
    const refuse = (refusal: Refusal): void => {
      note('CONNECT', host, port, refusal.decision, holder, refusal.reason);
      writeRaw(client, refusal.status, STATUS_TEXT[refusal.status] ?? 'Forbidden', message(host, port, refusal.reason, holder));
    };

    const verdict = await judge(holder, host, port);
    if ('decision' in verdict) return refuse(verdict);
    if (client.destroyed) return;
    const crowded = tooManyOpen(holder);
    if (crowded) return refuse(crowded);

    // Connected before the 200: a host that cannot be reached gets an answer the client shows, and the
    // handshake overlaps the client's first flight.
    const upstream = track(connect({ host: verdict.address, port, noDelay: true, timeout: CONNECT_TIMEOUT_MS }), credential);
    // Errors after the connection was judged end the tunnel (below); none may go unheard.
    upstream.on('error', () => undefined);
    const connected = await new Promise<Error | undefined>((resolve) => {
      upstream.once('connect', () => resolve(undefined));
      upstream.once('error', resolve);
      upstream.once('timeout', () => resolve(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)));
      client.once('close', () => resolve(new Error('the client hung up')));
    });
    upstream.setTimeout(0);
    if (connected) {
      upstream.destroy();
      return refuse({ status: 502, decision: 'failed', reason: `connecting to ${verdict.address}:${port} failed: ${(connected as NodeJS.ErrnoException).code ?? connected.message}` });
    }
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    upstream.once('close', () => client.destroy());
    client.once('close', () => upstream.destroy());
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');

    const { hello, bytes } = await readClientHello(client, head);
    const refusal = helloRefusal(hello, host);
    if (refusal) {
      // The tunnel was answered already: closing it is the refusal the client sees (as a failed handshake).
      note('CONNECT', host, port, refusal.decision, holder, refusal.reason);
      upstream.destroy();
      client.destroy();
      return;
    }
    note('CONNECT', host, port, 'allowed', holder);
    upstream.write(bytes);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async function forwardPlain(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const credential = credentialOf(request, options.grants);
    let url: URL | undefined;
    try {
      url = new URL(request.url ?? '');
    } catch {
      url = undefined;
    }
    const host = url ? normalHost(bareHost(url.hostname)) : String(request.url);
    const port = url ? Number(url.port || 80) : 0;
    const answer = (status: number, text: string, extra: Record<string, string> = {}): void => {
      request.resume();
      if (response.headersSent) return void response.destroy();
      response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close', ...extra });
      response.end(`${text}\n`);
    };
    if (isRefusal(credential)) {
      note('HTTP', host, port, credential.decision, undefined, credential.reason);
      return answer(407, message(host, port, credential.reason, undefined), { 'proxy-authenticate': 'Basic realm="berth"' });
    }
    const { holder } = credential;
    const refuse = (refusal: Refusal): void => {
      note('HTTP', host, port, refusal.decision, holder, refusal.reason);
      answer(refusal.status, message(host, port, refusal.reason, holder));
    };
    if (!url || url.protocol !== 'http:') {
      return refuse({ status: 400, decision: 'refused_protocol', reason: 'only http:// URLs pass as plain requests; HTTPS goes through CONNECT' });
    }
    // The Host header is what a virtual-hosting server routes on: it must name the host that was checked.
    const hostHeader = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(request.headers.host ?? '');
    if (!hostHeader || normalHost(bareHost(hostHeader[1]!)) !== host || Number(hostHeader[2] ?? 80) !== port) {
      return refuse({ status: 403, decision: 'refused_host', reason: `the Host header ("${request.headers.host ?? ''}") does not name the URL's host` });
    }
    const verdict = await judge(holder, host, port);
    if ('decision' in verdict) return refuse(verdict);
    const crowded = tooManyOpen(holder);
    if (crowded) return refuse(crowded);

    const headers = endToEndHeaders(request.headers);
    const outgoing: ClientRequest = track(
      httpRequest({ host: verdict.address, port, method: request.method, path: `${url.pathname}${url.search}`, headers, setHost: false, agent: false, timeout: CONNECT_TIMEOUT_MS }),
      credential,
    );
    outgoing.on('socket', (socket: Socket) => socket.setNoDelay(true));
    outgoing.once('response', (upstream) => {
      outgoing.setTimeout(0);
      note('HTTP', host, port, 'allowed', holder);
      response.writeHead(upstream.statusCode ?? 502, upstream.statusMessage, endToEndHeaders(upstream.headers));
      upstream.pipe(response);
      upstream.on('error', () => response.destroy());
    });
    outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)));
    outgoing.on('error', (error: NodeJS.ErrnoException) => {
      if (response.headersSent) return void response.destroy();
      refuse({ status: 502, decision: 'failed', reason: `forwarding to ${verdict.address}:${port} failed: ${error.code ?? error.message}` });
    });
    response.on('close', () => {
      if (!response.writableFinished) outgoing.destroy();
    });
    request.pipe(outgoing);
  }

  return {
    connect(request, client, head) {
      connectTunnel(request, client, head).catch((error: unknown) => {
        log({ err: error }, 'egress: CONNECT failed');
        client.destroy();
      });
    },
    request(request, response) {
      forwardPlain(request, response).catch((error: unknown) => {
        log({ err: error }, 'egress: plain request failed');
        response.destroy();
      });
    },
    close() {
      clearInterval(sweep);
      for (const thing of open.keys()) thing.destroy();
      open.clear();
    },
  };
}
