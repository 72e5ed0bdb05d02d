// Addresses no outbound connection made on a caller's behalf may reach unless an operator says so: the
// webhook deliverer (core/webhooks/destination-policy.ts) and the egress proxy (gateway/destination.ts) judge
// every resolved address by this one list, so the two cannot drift apart.
import { BlockList, isIP } from 'node:net';

// Loopback, unspecified, link-local (cloud metadata 169.254.169.254), private, CGNAT, multicast, reserved,
// broadcast, documentation and benchmarking ranges, for IPv4 and IPv6 (IPv4-compatible, NAT64, site-local and
// unique-local forms included: fd00:ec2::254, a cloud metadata address, is in fc00::/7). BlockList judges
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, ::ffff:7f00:1) by the IPv4 rules.
export const INTERNAL_V4: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
];
export const INTERNAL_V6: readonly (readonly [string, number])[] = [
  ['::', 96], ['64:ff9b::', 96], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
];

/** A fresh BlockList of every internal range (callers may add their own entries to theirs). */
export function internalRanges(): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of INTERNAL_V4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of INTERNAL_V6) list.addSubnet(network, prefix, 'ipv6');
  return list;
}

/** BlockList's family name of an address literal (anything not IPv6 is judged as IPv4). */
export function familyOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}

/** `[::1]` (a URL's or CONNECT target's host) → `::1`. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1');
}
