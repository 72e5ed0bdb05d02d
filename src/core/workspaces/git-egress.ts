// A git clone's way out (docs/egress.md): its container sits on the agent network like a run's, with no
// route out, and reaches exactly the host of its URL through Berth's egress proxy. Git speaks HTTP(S)
// through a proxy (libcurl reads https_proxy), but not ssh or git://, which are raw TCP: refused here with
// a 400 rather than left to time out in the container.
import { errors } from '../../errors.js';
import { parseHostPattern, patternCovered, type EgressPolicy, type HostPattern } from '../../egress-policy.js';

/** The egress policy of a clone of `url` (already checked by checkGitUrl): its host and port, nothing else. */
export function cloneEgressPolicy(url: string, allowedHosts: readonly HostPattern[] | undefined): EgressPolicy {
  const parsed = new URL(url);
  const scheme = parsed.protocol.slice(0, -1);
  if (scheme !== 'https' && scheme !== 'http') {
    throw errors.invalid(`git.url: ${scheme} cannot pass the egress proxy; use https`);
  }
  // `host` keeps a port the URL names explicitly (WHATWG drops the scheme's default one); a pattern without
  // a port admits 80 and 443, which covers both default ports.
  const pattern = parseHostPattern(parsed.host);
  if (typeof pattern === 'string') throw errors.invalid(`git.url: its host ${pattern}`);
  if (allowedHosts && !patternCovered(allowedHosts, pattern)) {
    throw errors.invalid(`git.url: "${pattern.text}" is not among the hosts this server allows (SERVICE_EGRESS_ALLOWED_HOSTS)`);
  }
  return { mode: 'allowlist', allow: [pattern] };
}
