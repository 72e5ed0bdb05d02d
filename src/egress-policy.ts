// Which outside hosts a run may reach through Berth's egress proxy (docs/egress.md). A pure value module:
// the configuration (SERVICE_EGRESS_*), the request's `container.network`, and the proxy's decision at each
// connection all use these types and this one matcher, so what is validated is exactly what is enforced.
//
// A host pattern is `name`, `*.name` (any subdomain of name, not name itself) or either with `:port`.
// Without a port it admits ports 80 and 443 only: a listed name is a web host, not every service it runs.

/** One entry of an allowlist. */
export interface HostPattern {
  /** As written (lower-cased), for messages and responses. */
  readonly text: string;
  /** The name without `*.` (lower case, no trailing dot). */
  readonly name: string;
  /** `*.name`: subdomains of name only. */
  readonly wildcard: boolean;
  /** The one port admitted; undefined: 80 and 443. */
  readonly port: number | undefined;
}

/** What a run may reach: nothing, the listed hosts, or any public host. The model gateway is always reachable. */
export type EgressPolicy =
  | { readonly mode: 'none' }
  | { readonly mode: 'allowlist'; readonly allow: readonly HostPattern[] }
  | { readonly mode: 'open' };

export type EgressMode = EgressPolicy['mode'];
export const EGRESS_MODES: readonly EgressMode[] = ['none', 'allowlist', 'open'];

/** Ports a pattern without `:port` admits. */
export const WEB_PORTS: readonly number[] = [80, 443];

/** Most patterns one allowlist may hold (a request's or the operator's). */
export const MAX_ALLOW_ENTRIES = 64;

const LABEL = '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?';
const HOST_NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(\\.${LABEL})*$`);
const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

/**
 * Parses one pattern; a string is the reason it is not one (for a 400 or a start-up error naming the field).
 * IPv4 literals are accepted (without `*.`); the proxy still refuses internal addresses whatever the list says.
 */
export function parseHostPattern(input: string): HostPattern | string {
  const text = input.trim().toLowerCase().replace(/\.$/, '').replace(/\.:/, ':');
  if (text === '') return 'is empty';
  if (text === '*') return '"*" is not a host pattern; ask for mode "open" instead';
  const match = /^(\*\.)?([^:*]+)(?::(\d{1,5}))?$/.exec(text);
  if (!match) return `"${input}" is not a host pattern (name, *.name, optionally :port)`;
  const wildcard = match[1] !== undefined;
  const name = match[2]!;
  const port = match[3] === undefined ? undefined : Number(match[3]);
  if (port !== undefined && (port < 1 || port > 65535)) return `"${input}": port must be 1-65535`;
  const ip = IPV4.test(name);
  if (!ip && (!HOST_NAME.test(name) || /(^|\.)\d+$/.test(name))) return `"${input}" is not a host name`;
  if (ip && wildcard) return `"${input}": "*." needs a host name, not an address`;
  if (wildcard && !name.includes('.')) return `"${input}": "*." needs a domain with a dot (e.g. *.example.com)`;
  return { text, name, wildcard, port };
}

/** Host names compare in lower case without a trailing dot. */
export function normalHost(host: string): string {
  return host.trim().toLowerCase().replace(/\.$/, '');
}

/** Whether one pattern admits host:port. */
export function patternAdmits(pattern: HostPattern, host: string, port: number): boolean {
  const name = normalHost(host);
  const nameOk = pattern.wildcard ? name.endsWith(`.${pattern.name}`) : name === pattern.name;
  const portOk = pattern.port === undefined ? WEB_PORTS.includes(port) : pattern.port === port;
  return nameOk && portOk;
}

/** Whether a policy lets a run reach host:port (before the proxy's address checks). */
export function policyAdmits(policy: EgressPolicy, host: string, port: number): boolean {
  switch (policy.mode) {
    case 'none':
      return false;
    case 'open':
      return true;
    case 'allowlist':
      return policy.allow.some((pattern) => patternAdmits(pattern, host, port));
  }
}

/**
 * Whether an operator's list (SERVICE_EGRESS_ALLOWED_HOSTS) covers a requested pattern entirely: every
 * host:port the requested one admits, one of the operator's admits too.
 */
export function patternCovered(operator: readonly HostPattern[], requested: HostPattern): boolean {
  return operator.some((allowed) => {
    const portOk = allowed.port === undefined ? requested.port === undefined || WEB_PORTS.includes(requested.port) : requested.port === allowed.port;
    if (!portOk) return false;
    if (!allowed.wildcard) return !requested.wildcard && requested.name === allowed.name;
    // `*.x` covers `a.x` and `*.a.x` (and `*.x` itself), never `x`.
    return requested.name.endsWith(`.${allowed.name}`) || (requested.wildcard && requested.name === allowed.name);
  });
}

/** The policy as the API shows it (`container.network` of a request, echoed in usage and the console). */
export function describePolicy(policy: EgressPolicy): { mode: EgressMode; allow?: string[] } {
  return policy.mode === 'allowlist' ? { mode: 'allowlist', allow: policy.allow.map((p) => p.text) } : { mode: policy.mode };
}
