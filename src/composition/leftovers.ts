// What a previous process left. Async jobs still running and live agents are followed again later
// (JobService.start, AgentService.restore): their containers, run directories (by run id) and input
// directories (by the id their container is labelled with) stay. Everything else it left is removed here.
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { reapLeftovers } from '../core/reaper.js';
import type { ContainerRuntime } from '../runtime/container-runtime.js';
import { removeLeftoverBuilds, stopBuilds } from '../runtime/podman/rootless-build.js';
import type { Stores } from './stores.js';
import type { Teardown } from './teardown.js';

export interface LeftoverInputs {
  readonly config: Config;
  readonly runtime: ContainerRuntime;
  readonly stores: Pick<Stores, 'jobs' | 'agents'>;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

/** Removes what no live job or agent holds; answers the ids of the runs and input directories that stay. */
export async function reclaimLeftovers({ config, runtime, stores, logger, teardown }: LeftoverInputs): Promise<ReadonlySet<string>> {
  const liveRuns = new Set([
    ...(await stores.jobs.withStatus('running')).map((job) => job.runId),
    ...(await stores.agents.live()).flatMap((agent) => [agent.runId, agent.inputsId]),
  ]);
  await reapLeftovers(runtime, config.instanceName, logger, liveRuns);
  // Builds a killed process left: their processes, disks (SERVICE_COMPOSE_BUILD_DISK) and sandboxes.
  const leftoverBuilds = await removeLeftoverBuilds(config.instanceName);
  if (leftoverBuilds.length > 0) logger.warn({ sandboxes: leftoverBuilds }, 'removed the sandboxes of builds a previous process left');
  // Also at a stop after a failed start (stopWork may not have run).
  teardown.release(() => stopBuilds(config.instanceName));
  return liveRuns;
}
