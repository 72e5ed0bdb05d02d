// Networks over Podman's libpod REST API: the agent network (./agent-network.ts) and compose stacks'
// networks, one change at a time, and on a rootful host the network isolation (./network-isolation.ts)
// kept over every bridge Berth's networks have.
import type { AgentNetwork, Networks, NetworkSummary, StackNetwork } from '../ports/networks.js';
import { RuntimeError } from '../ports/runtime-error.js';
import type { PodmanClient } from './client.js';
import type { BridgeAddresses } from './bridge-address.js';
import { createBridgeWithGateway, ensureAgentNetwork, releaseAgentNetwork } from './agent-network.js';
import type { AgentBridge, NetworkIsolation } from './network-isolation.js';

export class PodmanNetworks implements Networks {
  readonly #client: PodmanClient;
  readonly #bridges: BridgeAddresses;
  /** Set by isolateNetworks (rootful): stack bridges are added to it as their networks are created. */
  #isolation: NetworkIsolation | undefined;
  /** Stack networks are created and removed one at a time: a removed bridge's name is soon reused. */
  #changes: Promise<unknown> = Promise.resolve();

  constructor(client: PodmanClient, bridges: BridgeAddresses) {
    this.#client = client;
    this.#bridges = bridges;
  }

  async networkSubnets(name: string): Promise<string[]> {
    if (name === 'none') return [];
    const network = await this.#client.json<{ subnets?: { subnet: string }[] | null }>(`/networks/${encodeURIComponent(name)}/json`);
    return (network.subnets ?? []).map((s) => s.subnet);
  }

  async networkGateways(name: string): Promise<string[]> {
    if (name === 'none') return [];
    const network = await this.#client.json<{ subnets?: { gateway?: string }[] | null }>(`/networks/${encodeURIComponent(name)}/json`);
    return (network.subnets ?? []).flatMap((s) => (s.gateway ? [s.gateway] : []));
  }

  async createNetwork(name: string, labels: Readonly<Record<string, string>>): Promise<StackNetwork> {
    // Internal: no default route, so a stack's services reach nothing outside their network (its gateway,
    // the host, is closed by the network isolation but for Berth's gateway port). No DNS: aardvark-dns would
    // forward every name it does not know to the host's resolvers, a way out for data (docs/egress.md).
    return this.#oneChange(async () => {
      const created = await createBridgeWithGateway(this.#client, name, labels, true, { adoptExisting: false });
      try {
        const [first] = created.subnets;
        if (!first || created.subnets.length !== 1) throw new RuntimeError(`the network ${name} got ${created.subnets.length} IPv4 subnets with a gateway, not one`, false);
        if (this.#isolation) {
          if (!created.network_interface) throw new RuntimeError(`the network ${name} has no bridge on this host to isolate`, false);
          await this.#isolation.isolate(created.network_interface);
        }
        return { subnet: first.subnet, gateway: first.gateway };
      } catch (error) {
        await this.#delete(name).catch(() => undefined);
        throw error;
      }
    });
  }

  async removeNetwork(name: string): Promise<void> {
    this.#bridges.forget(name);
    await this.#oneChange(async () => {
      const bridge = this.#isolation ? await this.#bridgeOf(name) : undefined;
      await this.#delete(name);
      if (bridge) await this.#isolation?.release(bridge.interfaceName);
    });
  }

  async ensureAgentNetwork(name: string, labels: Readonly<Record<string, string>>, options: { readonly internal: boolean }): Promise<AgentNetwork> {
    return this.#oneChange(() => ensureAgentNetwork(this.#client, name, labels, options.internal));
  }

  async releaseAgentNetwork(name: string): Promise<boolean> {
    this.#bridges.forget(name);
    return this.#oneChange(() => releaseAgentNetwork(this.#client, name));
  }

  async listNetworks(label: string): Promise<NetworkSummary[]> {
    const found = await this.#client.json<{ name: string; labels?: Record<string, string> | null; subnets?: { subnet: string }[] | null }[]>('/networks/json', {
      query: { filters: JSON.stringify({ label: [label] }) },
    });
    return found.map((network) => ({ name: network.name, labels: network.labels ?? {}, subnets: (network.subnets ?? []).map((s) => s.subnet) }));
  }

  /**
   * Installs the host's network isolation (rootful Podman: runtime/podman/network-isolation.ts) over the
   * agent network (which reaches only `gatewayPort` of the host) and the stack networks labelled
   * `stackLabel` that exist already; stack networks created from now on are covered as they are created.
   * Answers its removal.
   */
  async isolateNetworks(isolation: NetworkIsolation, agentNetwork: string, stackLabel: string, gatewayPort: number): Promise<() => Promise<void>> {
    const agent = await this.#bridgeOf(agentNetwork);
    // Engine containers would otherwise reach every service of the host (docs/egress.md).
    if (agentNetwork !== 'none' && !agent) throw new RuntimeError(`the agent network ${agentNetwork} has no bridge on this host to isolate`, false);
    const existing = await this.listNetworks(stackLabel);
    const stackBridges = await Promise.all(existing.map((network) => this.#bridgeOf(network.name)));
    await isolation.install(agent, stackBridges.flatMap((bridge) => (bridge ? [bridge.interfaceName] : [])), gatewayPort);
    this.#isolation = isolation;
    return async () => {
      await this.#oneChange(async () => {
        this.#isolation = undefined;
        await isolation.uninstall();
      });
    };
  }

  async #delete(name: string): Promise<void> {
    await this.#client.call(`/networks/${encodeURIComponent(name)}`, { method: 'DELETE', query: { force: true }, accept: [404] });
  }

  #oneChange<T>(change: () => Promise<T>): Promise<T> {
    const done = this.#changes.then(change, change);
    this.#changes = done.catch(() => undefined);
    return done;
  }

  /** A network's bridge on this host (undefined: `none`, not a bridge, or not found). */
  async #bridgeOf(network: string): Promise<AgentBridge | undefined> {
    if (network === 'none' || network === 'host') return undefined;
    const inspect = await this.#client.jsonIfFound<{ driver?: string; network_interface?: string; subnets?: { subnet: string }[] | null }>(
      `/networks/${encodeURIComponent(network)}/json`,
    );
    if (inspect?.driver !== 'bridge' || !inspect.network_interface) return undefined;
    return { interfaceName: inspect.network_interface, subnets: (inspect.subnets ?? []).map((s) => s.subnet) };
  }
}
