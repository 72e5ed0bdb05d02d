// container.network: the run's egress policy (egress-policy.ts, docs/egress.md). Checked against the
// operator's settings here, so that the proxy only ever enforces a policy the server allows.
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import { parseHostPattern, patternCovered, type EgressPolicy, type HostPattern } from '../../egress-policy.js';
import type { ContainerOptions } from '../run-request.js';

type NetworkRequest = ContainerOptions['network'];

export function validateNetwork(network: NetworkRequest, config: Pick<Config, 'egress'>): EgressPolicy {
  const { egress } = config;
  // Rootless Podman gives containers a route out that Berth cannot close: no policy but `open` would hold,
  // so none is pretended. startBerth refuses to start so unless SERVICE_EGRESS_ALLOW_OPEN=true.
  if (!egress.enforced) {
    if (network?.mode !== undefined && network.mode !== 'open') {
      throw errors.invalid(`container.network.mode: "${network.mode}" cannot be enforced on this server (rootless Podman: containers have a route out); only "open" is available here`);
    }
    if (network?.allow !== undefined) throw errors.invalid('container.network.allow: cannot be enforced on this server (rootless Podman: containers have a route out)');
    if (!egress.allowOpen) throw errors.invalid('container.network.mode: egress cannot be enforced on this server and SERVICE_EGRESS_ALLOW_OPEN is not true');
    return { mode: 'open' };
  }
  const mode = network?.mode ?? 'allowlist';
  if (mode !== 'allowlist' && network?.allow !== undefined) {
    throw errors.invalid(`container.network.allow: only with mode "allowlist" (mode is "${mode}")`);
  }
  switch (mode) {
    case 'none':
      return { mode: 'none' };
    case 'open':
      if (!egress.allowOpen) {
        throw errors.invalid('container.network.mode: "open" is not allowed on this server (SERVICE_EGRESS_ALLOW_OPEN is not true); list the hosts in container.network.allow');
      }
      return { mode: 'open' };
    case 'allowlist': {
      if (network?.allow === undefined) return { mode: 'allowlist', allow: egress.defaultAllow };
      const allow: HostPattern[] = [];
      for (const [index, entry] of network.allow.entries()) {
        const field = `container.network.allow[${index}]`;
        const pattern = parseHostPattern(entry);
        if (typeof pattern === 'string') throw errors.invalid(`${field}: ${pattern}`);
        if (egress.allowedHosts && !patternCovered(egress.allowedHosts, pattern)) {
          throw errors.invalid(`${field}: "${pattern.text}" is not among the hosts this server allows (SERVICE_EGRESS_ALLOWED_HOSTS)`);
        }
        if (!allow.some((p) => p.text === pattern.text)) allow.push(pattern);
      }
      return { mode: 'allowlist', allow };
    }
  }
}
