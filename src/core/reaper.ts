// Removes what a previous process of this Berth instance left behind when it died without cleaning up
// (kill -9, power loss): its containers, found by its instance label (agent containers, and the git clones
// of POST /workspaces: core/workspaces/git-clone.ts), stray image probes, and the holder of its engine image
// mount.
import type { Logger } from 'pino';
import type { Containers } from '../runtime/ports/containers.js';
import { IMAGE_TREE_LABEL, INSTANCE_LABEL, PROBE_LABEL, RUN_LABEL } from '../runtime/ports/labels.js';

export async function reapLeftovers(runtime: Pick<Containers, 'listContainers' | 'removeContainer'>, instanceName: string, log: Logger, liveRuns: ReadonlySet<string> = new Set()): Promise<number> {
  const leftovers = [
    // The containers of runs this process follows again (async jobs still running) are not leftovers.
    ...(await runtime.listContainers(`${INSTANCE_LABEL}=${instanceName}`)).filter((c) => !liveRuns.has(c.labels[RUN_LABEL] ?? '')),
    ...(await runtime.listContainers(PROBE_LABEL)),
    ...(await runtime.listContainers(`${IMAGE_TREE_LABEL}=${instanceName}`)),
  ];
  for (const container of leftovers) {
    await runtime.removeContainer(container.id);
  }
  if (leftovers.length > 0) {
    log.warn({ count: leftovers.length, containers: leftovers.map((c) => c.names[0] ?? c.id) }, 'removed containers left by a previous run of this instance');
  }
  return leftovers.length;
}
