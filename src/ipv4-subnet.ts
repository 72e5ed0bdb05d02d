// IPv4 subnet arithmetic for the networks Berth makes (runtime/podman/agent-network.ts picks a network's
// gateway, core/compose/service-addresses.ts gives a stack's services their fixed addresses). IPv6 subnets
// are not handled: Berth's networks are IPv4 bridges.

interface HostRange {
  /** The first and last host addresses, as 32-bit numbers (network and broadcast addresses excluded). */
  readonly first: number;
  readonly last: number;
}

/** The host addresses of an IPv4 subnet in CIDR form; undefined for anything else, or a /31 or /32. */
function hostRange(cidr: string): HostRange | undefined {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  if (!match) return undefined;
  const prefix = Number(match[5]);
  const octets = match.slice(1, 5).map(Number);
  if (prefix > 30 || octets.some((o) => o > 255)) return undefined;
  const address = octets.reduce((n, o) => n * 256 + o, 0);
  const size = 2 ** (32 - prefix);
  const network = address - (address % size);
  return { first: network + 1, last: network + size - 2 };
}

function dotted(address: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(address / 2 ** shift) % 256).join('.');
}

/** The first host address of an IPv4 subnet (10.89.3.0/24 → 10.89.3.1); undefined for anything else. */
export function firstHostAddress(cidr: string): string | undefined {
  const range = hostRange(cidr);
  return range ? dotted(range.first) : undefined;
}

/**
 * The `index`-th host address counted down from the subnet's last one (10.89.3.0/24, 0 → 10.89.3.254);
 * undefined when the subnet has no such address or it would be the first (the gateway's).
 */
export function hostAddressFromTop(cidr: string, index: number): string | undefined {
  const range = hostRange(cidr);
  if (!range || !Number.isInteger(index) || index < 0) return undefined;
  const address = range.last - index;
  return address > range.first ? dotted(address) : undefined;
}
