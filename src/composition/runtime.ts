// The container runtime: Podman's API service (started by Berth unless SERVICE_PODMAN_SOCKET names one),
// the runtime over it, and the agent network every engine container joins.
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { withTranslatedErrors } from '../core/runtime-errors.js';
import { INSTANCE_LABEL, type ContainerRuntime } from '../runtime/container-runtime.js';
import { PodmanClient } from '../runtime/podman/client.js';
import { PodmanRuntime } from '../runtime/podman/podman-runtime.js';
import { startPodmanService, type PodmanService } from '../runtime/podman/service-process.js';
import type { Teardown } from './teardown.js';

/** The agent network as the runtime reports it: its name, subnets, gateway addresses, and who made it. */
export type AgentNetwork = Awaited<ReturnType<ContainerRuntime['ensureAgentNetwork']>>;

export interface RuntimeInputs {
  readonly config: Config;
  /** Rootful Podman: Berth's networks have no route out and are isolated in the host's nftables. */
  readonly rootful: boolean;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export interface BuiltRuntime {
  /** The Podman runtime itself: what only the composition root uses (network isolation) and tests inspect. */
  readonly podman: PodmanRuntime;
  /** The runtime core services get: its unreachable-Podman errors are already Berth's 503. */
  readonly runtime: ContainerRuntime;
  readonly agentNetwork: AgentNetwork;
}

export async function buildRuntime({ config, rootful, logger, teardown }: RuntimeInputs): Promise<BuiltRuntime> {
  let podmanService: PodmanService | undefined;
  let socketPath = config.podmanSocket;
  if (!socketPath) {
    podmanService = await startPodmanService(join(config.dataDir, 'podman'), (m) => logger.info(m));
    teardown.release(() => podmanService!.stop());
    socketPath = podmanService.socketPath;
  }
  const client = new PodmanClient(socketPath);
  teardown.release(() => client.close());
  const podman = new PodmanRuntime(client, (details, message) => logger.warn(details, message), config.agent.logMaxBytes, config.agent.image);
  const runtime = withTranslatedErrors(podman);
  await runtime.ping();
  // The agent network: rootful, no route out (the gateway's port is its one way out, closed to the rest of
  // the host by the network isolation: composition/gateway.ts); rootless, Podman's own route out. Removed
  // at stop when Berth made it and no container (a job, an agent) still uses it.
  const agentNetwork = await runtime.ensureAgentNetwork(config.agent.network, { [INSTANCE_LABEL]: config.instanceName }, { internal: rootful });
  if (agentNetwork.createdByBerth) {
    teardown.release(async () => {
      if (!(await podman.releaseAgentNetwork(agentNetwork.name))) logger.info({ network: agentNetwork.name }, 'the agent network is still used by containers that outlive this process: kept');
    });
  }
  if (!rootful) {
    logger.warn('rootless Podman: egress is not enforced (engine containers have a route out; only container.network mode "open" is accepted), and networks are not isolated between callers (stack networks have no route out, but engine containers can reach each other and other callers\' stacks; docs/egress.md, docs/compose.md)');
  }
  return { podman, runtime, agentNetwork };
}
