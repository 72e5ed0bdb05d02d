// Berth's one listener for agent containers (docs/egress.md): the model gateway (`/v1/…`, the engine's
// ANTHROPIC_BASE_URL) and the egress proxy (CONNECT and absolute-form requests, the container's
// HTTP_PROXY/HTTPS_PROXY) share a port, so a container's network needs exactly one way out: this port.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { BudgetCheck, GrantLookup, UpstreamModel, UsageRecorder } from '../core/gateway/gateway-types.js';
import { familyOf } from '../internal-addresses.js';
import type { Metrics } from '../metrics/metrics.js';
import { ownAddresses, type HostLookup } from './destination.js';
import { egressProxy } from './egress-proxy.js';
import { modelForwarder, writeApiError } from './model-forward.js';

export interface GatewayOptions {
  readonly host: string;
  readonly port: number;
  /** When set, connections from any other address are closed before a byte is read (./client-subnets.ts). */
  readonly allowedClients?: { check(address: string, family: 'ipv4' | 'ipv6'): boolean };
  readonly upstream: UpstreamModel;
  readonly grants: GrantLookup;
  readonly budgets: BudgetCheck;
  readonly usage: UsageRecorder;
  /** Called once per refused model request of a bound grant (RunGrants.noteRefusal). */
  readonly onBudgetRefusal: (runId: string, message: string) => void;
  readonly metrics: Pick<Metrics, 'egressRequests' | 'gatewayRequests' | 'gatewayOverhead' | 'modelTokens'>;
  /** Tests only (startBerth's hooks): host name → IPv4 address standing for an outside host; such addresses skip the internal-address check. */
  readonly resolveOverride?: ReadonlyMap<string, string>;
  /** Tests only: the egress proxy's resolver (default: the system's). */
  readonly lookup?: HostLookup;
  /** Tests only: how often tunnels of ended runs are closed (default 10 s). */
  readonly revocationSweepMs?: number;
  readonly log: (details: Record<string, unknown>, message: string) => void;
}

export interface GatewayHandle {
  readonly port: number;
  close(): Promise<void>;
}

export async function startGateway(options: GatewayOptions): Promise<GatewayHandle> {
  const forwarder = modelForwarder(options);
  const proxy = egressProxy({
    grants: options.grants, usage: options.usage, metrics: options.metrics, log: options.log,
    resolveOverride: options.resolveOverride, own: ownAddresses(),
    ...(options.lookup ? { lookup: options.lookup } : {}),
    ...(options.revocationSweepMs ? { revocationSweepMs: options.revocationSweepMs } : {}),
  });
  const sockets = new Set<Socket>();

  const server = createServer({ noDelay: true }, (request: IncomingMessage, response: ServerResponse) => {
    const url = request.url ?? '';
    if (url.startsWith('/v1/')) forwarder.handle(request, response);
    else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) proxy.request(request, response);
    else {
      request.resume();
      writeApiError(response, 404, 'not_found_error', `Berth gateway: no route for ${request.method} ${url.split('?')[0]}`);
    }
  });
  server.on('connect', (request: IncomingMessage, socket: Duplex, head: Buffer) => proxy.connect(request, socket, head));

  // The engine reuses kept-alive connections between the requests of a turn; Node's 5 s default would close
  // them between two requests of a slow turn and the next one could cross the close (ECONNRESET).
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  // A model answer may stream for many minutes; only receiving a request is bounded.
  server.requestTimeout = 300_000;

  const { allowedClients } = options;
  server.on('connection', (socket: Socket) => {
    if (allowedClients) {
      const address = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
      if (!allowedClients.check(address, familyOf(address))) {
        socket.destroy();
        return;
      }
    }
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        proxy.close();
        forwarder.close();
        for (const socket of sockets) socket.destroy();
      }),
  };
}
