// --network and --allow: a run's egress policy (container.network) from the command line. --allow (repeatable)
// means an allowlist of exactly those hosts; --network allowlist alone, or neither option, leaves the
// server's default list (SERVICE_EGRESS_DEFAULT_ALLOW). The patterns are checked by Berth, which names the
// one it refuses.
import { InvalidArgumentError } from 'commander';
import type { NetworkMode, NetworkPolicy } from '@berth/client';

export const NETWORK_MODES: readonly NetworkMode[] = ['none', 'allowlist', 'open'];

/**
 * The request's `container.network` for the options given, or undefined when neither was given. `allow`
 * with a mode other than allowlist is refused here rather than sent: Berth would refuse it too, and a
 * person who wrote `--network open --allow x` meant one of the two.
 */
export function networkPolicy(mode: NetworkMode | undefined, allow: readonly string[] | undefined): NetworkPolicy | undefined {
  if (allow !== undefined && mode !== undefined && mode !== 'allowlist') {
    throw new InvalidArgumentError(`--allow lists the hosts of an allowlist; it cannot go with --network ${mode}`);
  }
  if (allow !== undefined) return { mode: 'allowlist', allow: [...allow] };
  if (mode !== undefined) return { mode };
  return undefined;
}
