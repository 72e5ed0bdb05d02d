// The networks concern of the runtime: the agent network engine containers sit on and a compose stack's
// networks, each created, found by label and removed.

import type { LabelledObject } from './labels.js';

/** The network engine containers sit on, as Podman describes it. */
export interface AgentNetwork {
  readonly name: string;
  /** No route out of the network (Podman's `internal`). */
  readonly internal: boolean;
  /** Its bridge interface on this host (rootful; rootless Podman keeps it in its own namespace). */
  readonly bridge: string | undefined;
  readonly subnets: readonly string[];
  /** Addresses of the host on the network: where containers reach Berth's gateway. */
  readonly gateways: readonly string[];
  /** It carries the labels Berth creates it with: Berth made it, and removes it at stop. */
  readonly createdByBerth: boolean;
}

/** A network as listed: its IPv4 subnets too (where its containers connect from). */
export interface NetworkSummary extends LabelledObject {
  readonly subnets: readonly string[];
}

/** A stack's network as created: its one IPv4 subnet and the host's address on it (its gateway). */
export interface StackNetwork {
  readonly subnet: string;
  readonly gateway: string;
}

export interface Networks {
  /** The subnets (CIDR) of a network, e.g. ["10.88.0.0/16"]; empty for `none` or a network without any. */
  networkSubnets(name: string): Promise<string[]>;
  /** The gateway addresses of a network (empty for `none`). */
  networkGateways(name: string): Promise<string[]>;
  /**
   * A stack network: no route out, no DNS server (its containers know each other from their /etc/hosts:
   * fixed addresses, NetworkAttachment.address), and where the host allows it (rootful) reachable only from
   * its own containers, which reach on the host only Berth's gateway port (runtime/podman/network-isolation.ts).
   */
  createNetwork(name: string, labels: Readonly<Record<string, string>>): Promise<StackNetwork>;
  removeNetwork(name: string): Promise<void>;
  /**
   * The network engine containers sit on (runtime/podman/agent-network.ts): found, or created with these
   * labels, without DNS and, when `internal`, without a route out. Throws, with a message naming
   * SERVICE_AGENT_NETWORK, when the existing one has a route out though `internal` was asked for.
   */
  ensureAgentNetwork(name: string, labels: Readonly<Record<string, string>>, options: { readonly internal: boolean }): Promise<AgentNetwork>;
  /** Removes the agent network unless a container still uses it (then false: it is left for the next start). */
  releaseAgentNetwork(name: string): Promise<boolean>;
  listNetworks(label: string): Promise<NetworkSummary[]>;
}
