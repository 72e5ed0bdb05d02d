// Keeps callers' networks apart on the host. Podman's bridges are routed to each other by the host, and
// every engine container (runs, pooled engines, agents of every caller) shares the agent bridge, so without
// this a caller's plain run reached another caller's compose services by address (docs/compose.md).
//
// Berth owns two nftables tables per instance, installed at start (replacing one a crashed process left)
// and deleted at stop:
// - `inet berth-<instance>`: nothing is forwarded into or out of a stack bridge (only bridged traffic inside
//   one, which br_netfilter shows with the bridge as both interfaces); nothing reaches the host from a stack
//   bridge but the one TCP port of Berth's gateway (its egress proxy: stack networks have no DNS server,
//   their services know each other from /etc/hosts);
//   nothing is forwarded into or out of the agent bridge, not even port to port under br_netfilter (its
//   network is internal already: this also holds for one an operator made); and nothing reaches the host
//   from the agent bridge but the one TCP port of Berth's gateway (the model gateway and egress proxy,
//   docs/egress.md). Any service of the host listening on 0.0.0.0 or on the agent gateway's address would
//   answer containers otherwise; refused at once (a reset) rather than dropped, so a tool that tries
//   another port fails fast instead of waiting for a timeout.
//   Several Berths on one host each have their own agent network, bridge and table: each table names its
//   own bridge only.
// - `bridge berth-<instance>`: IPv4 frames bridged port to port with an address of the agent network are
//   dropped, whatever br_netfilter is set to. The kernel here has no `meta ibrname` (nft_meta_bridge), so the
//   agent bridge is told by its subnet. Frames to the gateway (the host, where Berth's gateway listens) are
//   delivered locally, not forwarded: engines still reach it.
// Stack bridges are named in sets the runtime updates when it creates and removes a stack network, before
// any container joins it. Rootless Podman keeps its bridges in its own network namespace, out of reach of
// the host's nftables: there is no isolation there (docs/compose.md).
import { spawn } from 'node:child_process';

/** Linux interface names: at most 15 characters of a safe set (they are written into nft scripts). */
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;
const IPV4_CIDR = /^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/;
/** Runs before the default filter priority, so other tables' accepts cannot let through what is dropped here. */
const PRIORITY = -10;

/** The shared bridge of engine containers: its interface and IPv4 subnets. */
export interface AgentBridge {
  readonly interfaceName: string;
  readonly subnets: readonly string[];
}

/** Applies an nft script atomically (`nft -f -`); rejects with nft's message. */
export type NftApply = (script: string) => Promise<void>;

export function nftTableName(instance: string): string {
  // SERVICE_INSTANCE_NAME is 1-63 of [A-Za-z0-9_.-]; nft identifiers must start with a letter.
  return `berth-${instance}`;
}

function checkedInterface(name: string): string {
  if (!INTERFACE_NAME.test(name)) throw new Error(`network isolation: "${name}" is not an interface name`);
  return name;
}

/** The whole ruleset of one instance, replacing whatever tables of that name exist (one transaction). */
function checkedPort(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`network isolation: ${port} is not a TCP port`);
  return port;
}

/**
 * The whole ruleset of one instance, replacing whatever tables of that name exist (one transaction).
 * `gatewayPort`: the one port of the host the agent bridge reaches (Berth's gateway).
 */
export function isolationScript(table: string, agent: AgentBridge | undefined, stackBridges: readonly string[], gatewayPort: number): string {
  const agentRules: string[] = [];
  const agentInputRules: string[] = [];
  const bridgeRules: string[] = [];
  if (agent) {
    const bridge = checkedInterface(agent.interfaceName);
    agentRules.push(`    iifname "${bridge}" drop`, `    oifname "${bridge}" drop`);
    agentInputRules.push(
      // Answers to connections the host opened (a container cannot make a new connection established).
      `    iifname "${bridge}" ct state established,related accept`,
      `    iifname "${bridge}" tcp dport ${checkedPort(gatewayPort)} accept`,
      `    iifname "${bridge}" meta l4proto tcp reject with tcp reset`,
      `    iifname "${bridge}" reject`,
    );
    const subnets = agent.subnets.filter((subnet) => IPV4_CIDR.test(subnet));
    if (subnets.length > 0) {
      bridgeRules.push(`    ether type ip ip saddr { ${subnets.join(', ')} } drop`, `    ether type ip ip daddr { ${subnets.join(', ')} } drop`);
    }
  }
  const stacks = stackBridges.map(checkedInterface);
  const elements = (values: string[]) => (values.length > 0 ? ` elements = { ${values.join(', ')} };` : '');
  return [
    // Adding then deleting makes the delete succeed whether or not a stale table exists.
    `table inet ${table} {}`,
    `delete table inet ${table}`,
    `table bridge ${table} {}`,
    `delete table bridge ${table}`,
    `table inet ${table} {`,
    `  set stack_bridges { type ifname;${elements(stacks.map((s) => `"${s}"`))} }`,
    `  set same_bridge { type ifname . ifname;${elements(stacks.map((s) => `"${s}" . "${s}"`))} }`,
    `  chain forward {`,
    `    type filter hook forward priority ${PRIORITY}; policy accept;`,
    `    iifname . oifname @same_bridge accept`,
    `    iifname @stack_bridges drop`,
    `    oifname @stack_bridges drop`,
    ...agentRules,
    `  }`,
    `  chain input {`,
    `    type filter hook input priority ${PRIORITY}; policy accept;`,
    // Stack services reach on the host only Berth's gateway (the egress proxy): no DNS server, no other port.
    `    iifname @stack_bridges ct state established,related accept`,
    `    iifname @stack_bridges tcp dport ${checkedPort(gatewayPort)} accept`,
    `    iifname @stack_bridges meta l4proto tcp reject with tcp reset`,
    `    iifname @stack_bridges drop`,
    ...agentInputRules,
    `  }`,
    `}`,
    `table bridge ${table} {`,
    `  chain forward {`,
    `    type filter hook forward priority ${PRIORITY}; policy accept;`,
    ...bridgeRules,
    `  }`,
    `}`,
    '',
  ].join('\n');
}

export class NetworkIsolation {
  private readonly table: string;
  private installed = false;

  constructor(instance: string, private readonly apply: NftApply = applyWithNft) {
    this.table = nftTableName(instance);
  }

  /**
   * Installs the instance's tables (replacing stale ones), covering the stack bridges that exist already;
   * from the agent bridge only `gatewayPort` of the host is reachable.
   */
  async install(agent: AgentBridge | undefined, stackBridges: readonly string[], gatewayPort: number): Promise<void> {
    await this.apply(isolationScript(this.table, agent, stackBridges, gatewayPort));
    this.installed = true;
  }

  /** Covers a new stack bridge; called before any container joins its network. */
  async isolate(bridge: string): Promise<void> {
    if (!this.installed) return;
    const name = checkedInterface(bridge);
    // One transaction: the bridge is never in one set without the other.
    await this.apply(
      [
        `add element inet ${this.table} same_bridge { "${name}" . "${name}" }`,
        `add element inet ${this.table} stack_bridges { "${name}" }`,
        '',
      ].join('\n'),
    );
  }

  /** Forgets a stack bridge before its network is removed (the name may go to another network later). */
  async release(bridge: string): Promise<void> {
    if (!this.installed) return;
    const name = checkedInterface(bridge);
    // `destroy element` is newer than Debian 12's nft: adding first makes the delete succeed either way.
    await this.apply(
      [
        `add element inet ${this.table} stack_bridges { "${name}" }`,
        `add element inet ${this.table} same_bridge { "${name}" . "${name}" }`,
        `delete element inet ${this.table} stack_bridges { "${name}" }`,
        `delete element inet ${this.table} same_bridge { "${name}" . "${name}" }`,
        '',
      ].join('\n'),
    );
  }

  /** Deletes the instance's tables (at stop). */
  async uninstall(): Promise<void> {
    if (!this.installed) return;
    this.installed = false;
    await this.apply([`table inet ${this.table} {}`, `delete table inet ${this.table}`, `table bridge ${this.table} {}`, `delete table bridge ${this.table}`, ''].join('\n'));
  }
}

async function applyWithNft(script: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn('nft', ['-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    const stderr: Buffer[] = [];
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`network isolation needs nftables' nft command (${error.message})`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`nft failed (${signal ?? `exit ${code}`}): ${Buffer.concat(stderr).toString('utf8').trim().slice(0, 500)}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(script);
  });
}
