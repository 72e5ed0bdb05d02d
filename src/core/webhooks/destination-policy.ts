// Where a webhook may be sent. A caller chooses webhook_url and partly controls the body, so without a rule
// it could make Berth POST to services on loopback, the host's private networks or a cloud metadata address.
// Internal destinations are denied unless SERVICE_WEBHOOK_ALLOWED_HOSTS names them, and the rule is applied
// to the address actually connected to: delivery resolves the name itself and connects only to an address
// that passed, so a name that resolves differently later (DNS rebinding) cannot reach an internal address.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { errors } from '../../errors.js';

// Loopback, unspecified, link-local (cloud metadata), private, CGNAT, multicast, reserved, broadcast,
// documentation and benchmarking ranges, for IPv4 and IPv6; IPv4-mapped IPv6 addresses are judged as IPv4.
const INTERNAL_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
];
const INTERNAL_V6: readonly [string, number][] = [
  ['::', 128], ['::1', 128], ['64:ff9b::', 96], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8],
];

function internalRanges(): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of INTERNAL_V4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of INTERNAL_V6) list.addSubnet(network, prefix, 'ipv6');
  return list;
}

/** `::ffff:10.0.0.1` → `10.0.0.1`; other addresses unchanged. */
function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

export type Lookup = (hostname: string, options: { all: true }, callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export class DestinationPolicy {
  private readonly internal = internalRanges();
  private readonly allowedAddresses = new BlockList();
  private readonly allowedNames = new Set<string>();

  /** `allowedHosts`: host names, IP addresses or CIDRs that may be targeted although internal. */
  constructor(
    allowedHosts: readonly string[],
    private readonly resolve: Lookup = (hostname, options, callback) => dnsLookup(hostname, options, callback),
  ) {
    for (const entry of allowedHosts) {
      const [address, prefix] = entry.split('/');
      const family = isIP(address ?? '');
      if (family === 0) {
        this.allowedNames.add(entry.toLowerCase());
        continue;
      }
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (prefix === undefined) this.allowedAddresses.addAddress(address!, type);
      else this.allowedAddresses.addSubnet(address!, Number(prefix), type);
    }
  }

  /** Whether a connection to `address` (resolved from `hostname`) is allowed. */
  allows(address: string, hostname: string): boolean {
    const plain = plainAddress(address);
    const type = isIP(plain) === 6 ? 'ipv6' : 'ipv4';
    if (this.allowedNames.has(hostname.toLowerCase()) || this.allowedAddresses.check(plain, type)) return true;
    return !this.internal.check(plain, type);
  }

  /** The addresses of `hostname` a delivery may connect to (a literal IP stands for itself). */
  async allowedAddressesOf(hostname: string): Promise<LookupAddress[]> {
    const bare = hostname.replace(/^\[(.*)\]$/, '$1');
    const family = isIP(bare);
    const addresses: LookupAddress[] =
      family !== 0
        ? [{ address: bare, family }]
        : await new Promise((resolve, reject) => this.resolve(bare, { all: true }, (error, found) => (error ? reject(error) : resolve(found))));
    return addresses.filter((entry) => this.allows(entry.address, bare));
  }

  /** At submission: a webhook_url none of whose addresses may be targeted is the caller's 400. */
  async check(url: string): Promise<void> {
    const { hostname } = new URL(url);
    let allowed: LookupAddress[];
    try {
      allowed = await this.allowedAddressesOf(hostname);
    } catch (error) {
      throw errors.invalid(`webhook_url: host "${hostname}" cannot be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    if (allowed.length === 0) {
      throw errors.invalid(
        `webhook_url: "${hostname}" is a loopback, private, link-local or otherwise internal address; webhooks may target it only when SERVICE_WEBHOOK_ALLOWED_HOSTS names it`,
      );
    }
  }

  /**
   * A `lookup` for the delivery's connection: the name is resolved here and only allowed addresses are
   * returned, so the socket connects to an address that passed the rule (none: the connection fails).
   */
  connectLookup(): (hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => void {
    return (hostname, options, callback) => {
      this.allowedAddressesOf(hostname).then(
        (addresses) => {
          if (addresses.length === 0) {
            const error = Object.assign(new Error(`webhook destination ${hostname} resolves only to internal addresses (SERVICE_WEBHOOK_ALLOWED_HOSTS)`), { code: 'EDESTINATIONDENIED' });
            callback(error);
          } else if (options.all) callback(null, addresses);
          else callback(null, addresses[0]!.address, addresses[0]!.family);
        },
        (error: unknown) => callback(error),
      );
    };
  }
}
