// The agent network: where every engine container of one Berth instance sits (runs, pooled engines,
// agents, workspace clones). Rootful, it has no route out (Podman's `internal`): the only way out is the
// one port of Berth's gateway on the network's gateway address, which network-isolation.ts keeps to that
// port (docs/egress.md).
//
// Podman 4.3 gives an internal network a gateway address only when DNS is on (its subnet validation adds
// one for `!internal || dns_enabled`). DNS stays off here, so that a container's resolver is not a server
// on the host, and the gateway is asked for explicitly: Podman first picks a free subnet, then the
// network is created again on that subnet with its first address as the gateway. Another process may take
// the subnet in between (test Berths start side by side): then the whole thing is tried again. Compose
// stacks' networks are made the same way (createBridgeWithGateway): no DNS server for their services to
// send names out through, and a gateway where they reach the egress proxy.
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentNetwork } from '../ports/networks.js';
import { firstHostAddress } from '../../ipv4-subnet.js';
import { PodmanApiError, type PodmanClient } from './client.js';

export interface LibpodNetwork {
  name: string;
  driver?: string;
  internal?: boolean;
  dns_enabled?: boolean;
  network_interface?: string;
  subnets?: { subnet: string; gateway?: string }[] | null;
  labels?: Record<string, string> | null;
}

/**
 * Creations raced by other Podman clients (side-by-side Berths, a cluster's nodes starting at once) are tried
 * again, after a short random pause: without it, a few clients picking the next free subnet at the same moment
 * kept colliding on it (seen in CI: five attempts in a row on one subnet).
 */
const ATTEMPTS = 8;
const RETRY_PAUSE_MS = { min: 50, spread: 250 };

function describe(network: LibpodNetwork, ownedBy: (labels: Readonly<Record<string, string>>) => boolean): AgentNetwork {
  const subnets = network.subnets ?? [];
  return {
    name: network.name,
    internal: network.internal === true,
    bridge: network.driver === 'bridge' ? network.network_interface : undefined,
    subnets: subnets.map((s) => s.subnet),
    gateways: subnets.flatMap((s) => (s.gateway ? [s.gateway] : [])),
    createdByBerth: ownedBy(network.labels ?? {}),
  };
}

export async function ensureAgentNetwork(
  client: PodmanClient,
  name: string,
  labels: Readonly<Record<string, string>>,
  internal: boolean,
): Promise<AgentNetwork> {
  if (name === 'none' || name === 'host') {
    throw new Error(`SERVICE_AGENT_NETWORK: "${name}" cannot be the agent network: engines reach the model only through Berth's gateway, on a bridge network of their own`);
  }
  const ownedBy = (found: Readonly<Record<string, string>>) => Object.entries(labels).every(([key, value]) => found[key] === value);
  const existing = await client.jsonIfFound<LibpodNetwork>(`/networks/${encodeURIComponent(name)}/json`);
  if (existing) return checked(describe(existing, ownedBy), internal);
  const created = await createBridgeWithGateway(client, name, labels, internal, { adoptExisting: true });
  return checked(describe(created, ownedBy), internal);
}

/** A bridge network Berth made: its IPv4 subnets and their gateways (the host's address on the bridge). */
export interface GatewayedNetwork {
  readonly subnets: readonly { readonly subnet: string; readonly gateway: string }[];
}

/**
 * Creates a bridge network without DNS whose every subnet has a gateway address (see the top of this file),
 * internal (no route out) when asked. `adoptExisting`: a network of that name created meanwhile by someone
 * else is answered instead (the agent network, which side-by-side Berths may share); otherwise it is an error.
 */
export async function createBridgeWithGateway(
  client: PodmanClient,
  name: string,
  labels: Readonly<Record<string, string>>,
  internal: boolean,
  options: { readonly adoptExisting: boolean },
): Promise<LibpodNetwork & GatewayedNetwork> {
  const path = `/networks/${encodeURIComponent(name)}/json`;
  for (let attempt = 1; ; attempt++) {
    try {
      const picked = await client.json<LibpodNetwork>('/networks/create', { method: 'POST', json: { name, labels, driver: 'bridge', internal, dns_enabled: false } });
      const subnets = picked.subnets ?? [];
      if (subnets.length > 0 && subnets.every((s) => s.gateway)) return withGateways(picked);
      await client.call(`/networks/${encodeURIComponent(name)}`, { method: 'DELETE', accept: [404] });
      const chosen = subnets.map((s) => {
        const gateway = firstHostAddress(s.subnet);
        if (!gateway) throw new Error(`Podman gave network "${name}" the subnet ${s.subnet}, which has no IPv4 address for Berth's gateway`);
        return { subnet: s.subnet, gateway };
      });
      return withGateways(await client.json<LibpodNetwork>('/networks/create', {
        method: 'POST',
        json: { name, labels, driver: 'bridge', internal, dns_enabled: false, subnets: chosen },
      }));
    } catch (error) {
      // 409: someone created the name meanwhile; 500 "subnet … already used": the subnet was taken meanwhile.
      const taken = error instanceof PodmanApiError && error.statusCode === 409;
      if (taken && options.adoptExisting) {
        const existing = await client.jsonIfFound<LibpodNetwork>(path);
        if (existing) return withGateways(existing);
      }
      const retryable = error instanceof PodmanApiError && (taken ? options.adoptExisting : /already (used|exists)/i.test(error.message));
      if (!retryable || attempt >= ATTEMPTS) throw error;
      await sleep(RETRY_PAUSE_MS.min + Math.floor(Math.random() * RETRY_PAUSE_MS.spread));
    }
  }
}

function withGateways(network: LibpodNetwork): LibpodNetwork & GatewayedNetwork {
  return { ...network, subnets: (network.subnets ?? []).flatMap((s) => (s.gateway ? [{ subnet: s.subnet, gateway: s.gateway }] : [])) };
}

function checked(network: AgentNetwork, internal: boolean): AgentNetwork {
  if (internal && !network.internal) {
    throw new Error(
      `SERVICE_AGENT_NETWORK: network "${network.name}" has a route out: engine containers on it would reach the internet and the host's services directly, not through Berth's egress proxy. Remove it (podman network rm ${network.name}) for Berth to create it as an internal network, or name another network`,
    );
  }
  if (network.bridge === undefined) throw new Error(`SERVICE_AGENT_NETWORK: network "${network.name}" is not a bridge network on this host`);
  if (network.gateways.length === 0) {
    throw new Error(`SERVICE_AGENT_NETWORK: network "${network.name}" has no gateway address, where engine containers reach Berth's gateway. Remove it (podman network rm ${network.name}) for Berth to create it`);
  }
  return network;
}

/** Removes the agent network unless a container is still attached (a job or agent that outlives the stop). */
export async function releaseAgentNetwork(client: PodmanClient, name: string): Promise<boolean> {
  try {
    await client.call(`/networks/${encodeURIComponent(name)}`, { method: 'DELETE', accept: [404] });
    return true;
  } catch (error) {
    if (error instanceof PodmanApiError && /in use|has associated containers|containers? (is|are) using/i.test(error.message)) return false;
    throw error;
  }
}
