// Where a webhook may be sent. A caller chooses webhook_url and partly controls the body, so without a rule
// it could make Berth POST to services on loopback, the host's private networks or a cloud metadata address.
// Internal destinations are denied unless SERVICE_WEBHOOK_ALLOWED_HOSTS names them, and the rule is applied
// to the address actually connected to: delivery resolves the name itself and connects only to addresses
// that passed, so a name that resolves differently later (DNS rebinding) cannot reach an internal address.
// A name with even one internal address is refused whole: round-robin answers mixing a public and an
// internal address are a rebinding technique of their own.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { errors } from '../../errors.js';
import { bareHost, familyOf, internalRanges } from '../../internal-addresses.js';

export type Lookup = (hostname: string, options: { all: true }, callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

/** A host judged: every address it resolves to may be targeted, or the first that may not. */
export type Destination =
  | { readonly allowed: true; readonly addresses: readonly LookupAddress[] }
  | { readonly allowed: false; readonly denied: string };

export class DestinationPolicy {
  private readonly internal = internalRanges();
  private readonly allowedAddresses = new BlockList();
  private readonly allowedNames = new Set<string>();

  /** `allowedHosts`: host names, IP addresses or CIDRs that may be targeted although internal (checked by config.ts). */
  constructor(
    allowedHosts: readonly string[],
    private readonly resolve: Lookup = (hostname, options, callback) => dnsLookup(hostname, options, callback),
  ) {
    for (const entry of allowedHosts) {
      const [address, prefix] = entry.split('/');
      const family = isIP(address ?? '');
      if (family === 0) {
        this.allowedNames.add(entry.toLowerCase());
      } else if (prefix === undefined) {
        this.allowedAddresses.addAddress(address!, familyOf(address!));
      } else {
        this.allowedAddresses.addSubnet(address!, Number(prefix), familyOf(address!));
      }
    }
  }

  /** Whether a connection to `address` (resolved from `hostname`, the URL's host) is allowed. */
  allows(address: string, hostname: string): boolean {
    if (this.allowedNames.has(bareHost(hostname).toLowerCase())) return true;
    const family = familyOf(address);
    return this.allowedAddresses.check(address, family) || !this.internal.check(address, family);
  }

  /**
   * Resolves `hostname` (a literal IP stands for itself) and judges every address. Rejects when the name
   * cannot be resolved.
   */
  async destinationOf(hostname: string): Promise<Destination> {
    const bare = bareHost(hostname);
    const family = isIP(bare);
    const addresses: LookupAddress[] =
      family !== 0
        ? [{ address: bare, family }]
        : await new Promise((resolve, reject) => this.resolve(bare, { all: true }, (error, found) => (error ? reject(error) : resolve(found))));
    if (addresses.length === 0) throw Object.assign(new Error(`${bare} has no address`), { code: 'ENOTFOUND' });
    const denied = addresses.find((entry) => !this.allows(entry.address, bare));
    return denied ? { allowed: false, denied: denied.address } : { allowed: true, addresses };
  }

  /** At submission: a webhook_url with any address that may not be targeted is the caller's 400. */
  async check(url: string): Promise<void> {
    const { hostname } = new URL(url);
    let destination: Destination;
    try {
      destination = await this.destinationOf(hostname);
    } catch (error) {
      throw errors.invalid(`webhook_url: host "${hostname}" cannot be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    if (!destination.allowed) {
      const what = bareHost(hostname) === destination.denied ? `"${hostname}" is` : `"${hostname}" resolves to ${destination.denied},`;
      throw errors.invalid(
        `webhook_url: ${what} a loopback, private, link-local or otherwise internal address; webhooks may target it only when SERVICE_WEBHOOK_ALLOWED_HOSTS names it`,
      );
    }
  }

  /**
   * A `lookup` for the delivery's connection (undici passes it to net.connect): the name is resolved and
   * judged here, and the socket connects only to the addresses returned, the ones that passed. A denied
   * name fails the connection with code EDESTINATIONDENIED, which the deliverer does not retry.
   */
  connectLookup(): (hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => void {
    return (hostname, options, callback) => {
      this.destinationOf(hostname).then(
        (destination) => {
          if (!destination.allowed) {
            const message = `webhook destination ${hostname} resolves to ${destination.denied}, an internal address (SERVICE_WEBHOOK_ALLOWED_HOSTS does not name it)`;
            callback(Object.assign(new Error(message), { code: 'EDESTINATIONDENIED' }));
          } else if (options.all) {
            callback(null, destination.addresses);
          } else {
            callback(null, destination.addresses[0]!.address, destination.addresses[0]!.family);
          }
        },
        (error: unknown) => callback(error),
      );
    };
  }
}
