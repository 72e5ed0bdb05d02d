// The model gateway and egress proxy (src/gateway/, docs/egress.md): the one way out of engine containers.
// It listens on every address (the agent bridge has its address only once a container is on it) and
// admits only the agent network's subnets (rootful; rootless connections arrive through Podman's port
// forwarder). With it: the callers' daily budgets it counts, the host's network isolation that leaves the
// agent network only the gateway's port, and the sweep of credentials whose container is gone.
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { Budgets } from '../core/gateway/budgets.js';
import type { RunGrants } from '../core/gateway/run-grants.js';
import { HOST_FROM_CONTAINER, type EngineAccessState } from '../core/engine-access.js';
import { ClientSubnets } from '../gateway/client-subnets.js';
import { startGateway } from '../gateway/gateway-server.js';
import type { Metrics } from '../metrics/metrics.js';
import { GRANT_LABEL, INSTANCE_LABEL, RUN_LABEL, STACK_INSTANCE_LABEL, type ContainerRuntime } from '../runtime/container-runtime.js';
import { NetworkIsolation } from '../runtime/podman/network-isolation.js';
import type { PodmanRuntime } from '../runtime/podman/podman-runtime.js';
import type { UsageStore } from '../store/usage/usage-store.js';
import type { AgentNetwork } from './runtime.js';
import type { Teardown } from './teardown.js';

/** The gateway's upstream while no model is configured: runs are refused (503) before any container, so nothing calls it. */
const UNCONFIGURED_UPSTREAM = { baseUrl: 'http://127.0.0.1:9', credential: { kind: 'api_key', value: '' } } as const;

export interface GatewayInputs {
  readonly config: Config;
  readonly rootful: boolean;
  readonly podman: PodmanRuntime;
  readonly runtime: ContainerRuntime;
  readonly agentNetwork: AgentNetwork;
  /** The engine's access decided at start, and the per-run credentials the gateway admits. */
  readonly access: EngineAccessState;
  readonly grants: RunGrants;
  readonly usage: UsageStore;
  readonly metrics: Metrics;
  /** Tests only: host name → address the egress proxy connects to, without the internal-address check. */
  readonly resolveOverride: ReadonlyMap<string, string> | undefined;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export interface BuiltGateway {
  /** Where engine containers reach the gateway, and its port on the host. */
  readonly url: string;
  readonly port: number;
  /** The subnets the gateway admits: the agent network's, and each stack's while the stack exists. */
  readonly clients: ClientSubnets;
  readonly budgets: Budgets;
}

export async function buildGateway(inputs: GatewayInputs): Promise<BuiltGateway> {
  const { config, rootful, podman, runtime, agentNetwork, access, grants, usage, metrics, logger, teardown } = inputs;
  const budgets = await Budgets.open(config.budgets, usage);
  const configured = access.mode === 'not-configured' ? UNCONFIGURED_UPSTREAM : access.upstream;
  // Read on every model request: a rotated credential secret is used from the next request on (engines
  // hold none, so nothing else has to change).
  let credential = configured.credential;
  const upstream = { baseUrl: configured.baseUrl, get credential() { return credential; } };
  if (access.mode === 'credentials-secret') {
    await watchCredentialSecret({ name: config.engine.credentialsSecret, runtime, logger, teardown }, (value) => (credential = { kind: credential.kind, value }));
  }
  // Agent containers connect from the agent network's subnets, stack services from their stack's (admitted
  // while the stack exists).
  const clients = new ClientSubnets(agentNetwork.subnets);
  const gateway = await startGateway({
    host: '0.0.0.0',
    port: config.gateway.port,
    ...(rootful ? { allowedClients: clients } : {}),
    upstream,
    grants,
    budgets,
    usage: budgets.recorder(usage),
    onBudgetRefusal: (runId, message) => grants.noteRefusal(runId, message),
    metrics,
    ...(inputs.resolveOverride ? { resolveOverride: inputs.resolveOverride } : {}),
    log: (details, message) => logger.info({ component: 'gateway', ...details }, message),
  });
  // Closed after every run ended (resources are released after the work), before the usage store.
  teardown.release(() => gateway.close());
  // Where engine containers reach it: the agent network's gateway address (rootful), else the name
  // rootless Podman gives the host.
  const agentNetworkGateway = agentNetwork.gateways[0];
  const host = rootful && agentNetworkGateway !== undefined ? agentNetworkGateway : HOST_FROM_CONTAINER;
  // Callers' networks are kept apart on the host, and the agent network reaches only the gateway's port,
  // before any stack is adopted or container started. Rootless Podman keeps its bridges in its own
  // network namespace, out of the host's nftables.
  if (rootful) {
    const byInstance = `${STACK_INSTANCE_LABEL}=${config.instanceName}`;
    const uninstall = await podman.isolateNetworks(new NetworkIsolation(config.instanceName), config.agent.network, byInstance, gateway.port);
    teardown.release(async () => {
      // Containers that outlive the stop (async jobs, agents) stay held to the rules until the next start replaces them.
      const remaining = await runtime.listContainers(`${INSTANCE_LABEL}=${config.instanceName}`).catch(() => []);
      if (remaining.length === 0) await uninstall();
      else logger.info({ containers: remaining.length }, 'network isolation kept for the containers that outlive this process');
    });
  }
  sweepGrants({ config, runtime, grants, logger, teardown });
  return { url: `http://${host}:${gateway.port}`, port: gateway.port, clients, budgets };
}

/**
 * A rotation replaces the secret (podman secret rm + create): a new id, looked up every 5 s (one inspect);
 * the value is read again only then (runtime.readSecret starts a container) and handed to `replaced`.
 */
async function watchCredentialSecret(
  { name, runtime, logger, teardown }: { readonly name: string; readonly runtime: ContainerRuntime; readonly logger: Logger; readonly teardown: Teardown },
  replaced: (value: string) => void,
): Promise<void> {
  let knownId = await runtime.secretId(name);
  let checking = false;
  const watch = setInterval(() => {
    if (checking) return;
    checking = true;
    void (async () => {
      const id = await runtime.secretId(name);
      if (id === undefined || id === knownId) return;
      const value = (await runtime.readSecret(name)).trim();
      if (value === '') return logger.warn({ secret: name }, 'the engine credential secret was replaced by an empty one: the previous credential stays in use');
      knownId = id;
      replaced(value);
      logger.info({ secret: name }, 'the engine credential secret was replaced: the model gateway uses the new one');
    })()
      .catch((error: unknown) => logger.warn({ err: error, secret: name }, 'the engine credential secret could not be read again'))
      .finally(() => (checking = false));
  }, 5_000);
  watch.unref();
  teardown.release(async () => clearInterval(watch));
}

/**
 * Grants whose container is gone (a path that ended without revoking, a container removed behind Berth's
 * back) are revoked every 30 s. Engines' grants are keyed by their run label, a stack's by its services'
 * grant label, git clones' by their container's name.
 */
function sweepGrants({ config, runtime, grants, logger, teardown }: Pick<GatewayInputs, 'config' | 'runtime' | 'grants' | 'logger' | 'teardown'>): void {
  const sweep = setInterval(() => {
    runtime
      .listContainers(`${INSTANCE_LABEL}=${config.instanceName}`)
      .then((containers) => {
        const revoked = grants.sweep(containers.flatMap((c) => [...[RUN_LABEL, GRANT_LABEL].flatMap((label) => c.labels[label] ?? []), ...c.names]));
        if (revoked > 0) logger.info({ revoked }, 'revoked the credentials of runs whose containers are gone');
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'the credential sweep failed'));
  }, 30_000);
  sweep.unref();
  teardown.release(async () => clearInterval(sweep));
}
