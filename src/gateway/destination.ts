// Where the egress proxy connects for a host a run asked for. The proxy resolves the name itself and connects
// to the very address it judged (pinned), so a name that resolves differently a moment later (DNS rebinding)
// cannot reach anything that was not checked. A name with even one internal address is refused whole: a
// round-robin answer mixing a public and an internal address is a rebinding technique of its own. Berth's own
// interface addresses are refused too: a public address of the host would otherwise reach its other ports.
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { normalHost } from '../egress-policy.js';
import { bareHost, familyOf, internalRanges } from '../internal-addresses.js';

export type Destination =
  | { readonly ok: true; readonly address: string; readonly family: 4 | 6 }
  | { readonly ok: false; readonly decision: 'refused_address' | 'failed'; readonly reason: string };

/** Every address a name resolves to (dns.promises.lookup with all: true, or a test's table). */
export type HostLookup = (host: string) => Promise<readonly { readonly address: string; readonly family: number }[]>;

export interface DestinationOptions {
  /** Tests only: host name → IPv4 address standing for an outside host; such addresses skip the internal checks. */
  readonly override?: ReadonlyMap<string, string> | undefined;
  readonly lookup?: HostLookup;
  /** The host's own addresses (ownAddresses()). */
  readonly own: () => BlockList;
}

const INTERNAL = internalRanges();

const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true });

/**
 * The host's own interface addresses, read at most every `ttlMs`: reading them costs ~0.4 ms with the many
 * veth interfaces of a busy Podman host, and a new bridge's address is private (refused as internal) anyway.
 */
export function ownAddresses(ttlMs = 5_000, read: typeof networkInterfaces = networkInterfaces): () => BlockList {
  let cached: { readonly at: number; readonly list: BlockList } | undefined;
  return () => {
    const now = Date.now();
    if (cached && now - cached.at < ttlMs) return cached.list;
    const list = new BlockList();
    for (const entries of Object.values(read())) {
      for (const entry of entries ?? []) list.addAddress(entry.address, familyOf(entry.address));
    }
    cached = { at: now, list };
    return list;
  };
}

/** Why an address may not be reached, or undefined when it may. */
function refusalOf(address: string, own: BlockList): string | undefined {
  const family = familyOf(address);
  if (INTERNAL.check(address, family)) return 'an internal address (loopback, private, link-local, metadata, multicast or reserved)';
  if (own.check(address, family)) return "one of Berth's own addresses";
  return undefined;
}

/** Resolves a host (an IP literal stands for itself) and judges every address; the one returned is the one to connect to. */
export async function resolveDestination(host: string, options: DestinationOptions): Promise<Destination> {
  const name = normalHost(bareHost(host));
  const overridden = options.override?.get(name);
  if (overridden !== undefined) return { ok: true, address: overridden, family: isIP(overridden) === 6 ? 6 : 4 };

  let addresses: readonly { readonly address: string; readonly family: number }[];
  if (isIP(name) !== 0) {
    addresses = [{ address: name, family: isIP(name) }];
  } else {
    try {
      addresses = await (options.lookup ?? systemLookup)(name);
    } catch (error) {
      return { ok: false, decision: 'failed', reason: `${name} cannot be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` };
    }
    if (addresses.length === 0) return { ok: false, decision: 'failed', reason: `${name} has no address` };
  }

  const own = options.own();
  for (const { address } of addresses) {
    const why = refusalOf(address, own);
    if (why !== undefined) {
      const what = address === name ? `${name} is` : `${name} resolves to ${address},`;
      return { ok: false, decision: 'refused_address', reason: `${what} ${why}` };
    }
  }
  // IPv4 first: a host without an IPv6 route would otherwise fail on an AAAA answer listed first.
  const pinned = addresses.find((entry) => entry.family === 4) ?? addresses[0]!;
  return { ok: true, address: pinned.address, family: pinned.family === 6 ? 6 : 4 };
}
