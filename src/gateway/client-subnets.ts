// Who may connect to Berth's gateway (rootful): the agent network's subnets, and each compose stack's
// subnet while its network exists (core/compose/stacks.ts admits and forgets them). Connections from
// anywhere else (the host's other networks, the LAN) are closed before a byte is read.
import { BlockList } from 'node:net';
import type { GatewayClients } from '../core/gateway/gateway-types.js';

export class ClientSubnets implements GatewayClients {
  /** Subnet → how many admissions hold it (a subnet Podman reuses for a new stack before the old one is forgotten). */
  private readonly held = new Map<string, number>();
  private list = new BlockList();

  constructor(private readonly fixed: readonly string[]) {
    this.rebuild();
  }

  admit(subnet: string): void {
    this.held.set(subnet, (this.held.get(subnet) ?? 0) + 1);
    this.rebuild();
  }

  forget(subnet: string): void {
    const count = this.held.get(subnet) ?? 0;
    if (count <= 1) this.held.delete(subnet);
    else this.held.set(subnet, count - 1);
    this.rebuild();
  }

  check(address: string, family: 'ipv4' | 'ipv6'): boolean {
    return this.list.check(address, family);
  }

  /** A BlockList cannot drop a rule: a fresh one for every change (stacks come and go rarely). */
  private rebuild(): void {
    const list = new BlockList();
    for (const subnet of [...this.fixed, ...this.held.keys()]) {
      const [address, prefix] = subnet.split('/');
      if (address === undefined || prefix === undefined) continue;
      list.addSubnet(address, Number(prefix), address.includes(':') ? 'ipv6' : 'ipv4');
    }
    this.list = list;
  }
}
