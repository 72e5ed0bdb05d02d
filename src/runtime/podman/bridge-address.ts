// A Linux bridge that has no hardware address of its own takes the lowest address among its ports, and
// takes another one when that port leaves. Containers keep the gateway's (the bridge's) address in their
// ARP cache; a container that lives on (an agent, a pooled engine, a long run) while the port its cache
// names is removed with its container sends its packets to nobody, and its connection to the model on the
// host stalls in TCP retransmissions for a minute or more (seen: an agent's turn hung with 50 KB unacked
// and its gateway entry on PROBE for the address of a removed container's port). Netavark 1.4 leaves the
// address to the kernel. Berth gives each bridge its current address explicitly after starting a container
// on it; the kernel then keeps that address whatever ports come and go, and caches stay right.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** /sys/class/net/<if>/addr_assign_type of an address set explicitly (NET_ADDR_SET). */
const ADDRESS_SET = '3';

/** Linux interface names: at most 15 characters, no slash (the name is also a path under sysfs). */
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

export interface BridgeAddressDependencies {
  /** The host interface of a network, undefined when it has none here (`none`, `host`, rootless networks). */
  interfaceOf(network: string): Promise<string | undefined>;
  /** Sets an interface's hardware address (by default `ip link set dev <if> address <mac>`). */
  setAddress?(interfaceName: string, address: string): Promise<void>;
  /** Where interfaces are described (by default /sys/class/net). */
  sysfs?: string;
  warn(details: Record<string, unknown>, message: string): void;
}

const runIp = promisify(execFile);

export class BridgeAddresses {
  private readonly interfaces = new Map<string, Promise<string | undefined>>();
  /** Interfaces whose pinning failed once: warned about once, not retried on every start. */
  private readonly failed = new Set<string>();

  constructor(private readonly deps: BridgeAddressDependencies) {}

  /** Pins the address of every bridge among the networks; never throws (a failure is warned about once). */
  async pin(networks: readonly string[]): Promise<void> {
    await Promise.all(networks.map((network) => this.pinNetwork(network)));
  }

  /** A removed network's interface name may go to another network later. */
  forget(network: string): void {
    this.interfaces.delete(network);
  }

  private async pinNetwork(network: string): Promise<void> {
    const interfaceName = await this.interfaceOf(network);
    if (interfaceName === undefined || this.failed.has(interfaceName)) return;
    const directory = join(this.deps.sysfs ?? '/sys/class/net', interfaceName);
    let assignType: string;
    let address: string;
    try {
      [assignType, address] = await Promise.all([readFile(join(directory, 'addr_assign_type'), 'utf8'), readFile(join(directory, 'address'), 'utf8')]);
    } catch {
      // Not in this network namespace (rootless Podman keeps its bridges in its own).
      return;
    }
    if (assignType.trim() === ADDRESS_SET) return;
    try {
      await (this.deps.setAddress ?? setWithIp)(interfaceName, address.trim());
    } catch (error) {
      this.failed.add(interfaceName);
      this.deps.warn(
        { network, interface: interfaceName, err: error },
        'the bridge\'s hardware address could not be fixed: when a container leaves the network, agents and long runs on it may lose their connection to the model for a minute (install iproute2 and run Berth as root)',
      );
    }
  }

  private interfaceOf(network: string): Promise<string | undefined> {
    let found = this.interfaces.get(network);
    if (!found) {
      found = this.deps.interfaceOf(network).then(
        (name) => (name !== undefined && INTERFACE_NAME.test(name) ? name : undefined),
        () => undefined,
      );
      this.interfaces.set(network, found);
    }
    return found;
  }
}

async function setWithIp(interfaceName: string, address: string): Promise<void> {
  await runIp('ip', ['link', 'set', 'dev', interfaceName, 'address', address], { timeout: 10_000 });
}
