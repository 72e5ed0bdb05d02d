// A TCP proxy on loopback that passes a server's answers on at a fixed rate, so that a pull through it takes
// long enough to be interrupted. It counts the bytes it passed on and the connections open through it, which
// is how a test sees whether a pull is still going.
import { connect, createServer, type Socket } from 'node:net';

export interface ThrottledProxy {
  /** host:port to use in place of the target's. */
  readonly host: string;
  /** Bytes of the target's answers passed on so far. */
  bytesPassed(): number;
  openConnections(): number;
  stop(): Promise<void>;
}

export async function startThrottledProxy(target: string, bytesPerSecond: number): Promise<ThrottledProxy> {
  const [targetHost, targetPort] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  let passed = 0;
  const clients = new Set<Socket>();
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    clients.add(client);
    sockets.add(client);
    sockets.add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      clients.delete(client);
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      // One chunk at a time, each followed by the pause its size takes at the given rate.
      upstream.pause();
      passed += chunk.length;
      client.write(chunk);
      setTimeout(() => upstream.resume(), (chunk.length / bytesPerSecond) * 1000).unref();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('the proxy has no address');
  return {
    host: `127.0.0.1:${address.port}`,
    bytesPassed: () => passed,
    openConnections: () => clients.size,
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
