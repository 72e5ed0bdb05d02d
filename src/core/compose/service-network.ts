// How a compose stack's services find each other and the way out (docs/compose.md, docs/egress.md). A
// stack's network has no DNS server (aardvark-dns would forward every unknown name to the host's resolvers:
// a way out for data), so each service gets a fixed address, counted down from the top of the network's
// subnet, and every container of the stack (the engine's too) an /etc/hosts naming them all. The only way
// out is Berth's egress proxy on the network's gateway, with a credential of the stack's own bound to the
// current run's caller and egress policy.
import { hostAddressFromTop } from '../../ipv4-subnet.js';
import { errors } from '../../errors.js';

export interface HostEntry {
  readonly host: string;
  readonly address: string;
}

/** The grant (core/gateway/run-grants.ts) a stack's services share: the stack's network's name. */
export function stackGrantId(sessionId: string): string {
  return `berth-stack-${sessionId}`;
}

/**
 * Each service's fixed address on the stack's subnet, in the definition's order from the top down (Podman
 * hands out addresses from the bottom up: an engine container joining later never takes one of these).
 */
export function serviceAddresses(subnet: string, services: readonly string[]): ReadonlyMap<string, string> {
  const addresses = new Map<string, string>();
  services.forEach((name, index) => {
    const address = hostAddressFromTop(subnet, index);
    if (address === undefined) throw errors.stackFailed(`the stack's network ${subnet} has no address left for service "${name}"`);
    addresses.set(name, address);
  });
  return addresses;
}

/** /etc/hosts entries for every service (its own name included: Podman's hosts file names only the container). */
export function serviceHostEntries(addresses: ReadonlyMap<string, string>): HostEntry[] {
  return [...addresses].map(([host, address]) => ({ host, address }));
}

/**
 * The proxy variables of a service (both spellings, as tools read either): Berth's egress proxy on the
 * stack's gateway, and no proxy for the stack's own names and addresses (the proxy refuses private
 * addresses, so traffic between services must not go through it). A NO_PROXY the compose file gives is kept
 * after Berth's.
 */
export function serviceProxyEnvironment(
  proxy: { readonly gateway: string; readonly port: number; readonly token: string },
  names: readonly string[],
  subnet: string,
  given: Readonly<Record<string, string>>,
): Record<string, string> {
  const url = `http://berth:${proxy.token}@${proxy.gateway}:${proxy.port}`;
  const own = given.NO_PROXY ?? given.no_proxy;
  const direct = ['localhost', '127.0.0.1', subnet, ...names, ...(own !== undefined && own !== '' ? [own] : [])].join(',');
  return { HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url, NO_PROXY: direct, no_proxy: direct };
}
