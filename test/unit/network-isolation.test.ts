// The nftables scripts of the network isolation (runtime/podman/network-isolation.ts), against a recording
// nft: one transaction that replaces stale tables, the agent bridge reaching only the gateway's port, stack bridges added to and removed from both sets at
// once, nothing applied before install or after uninstall, and no name that could inject nft syntax. The
// rules' effect on real traffic is tested in test/integration/attack-networks.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetworkIsolation, isolationScript } from '../../src/runtime/podman/network-isolation.js';

function recording() {
  const scripts: string[] = [];
  return { scripts, isolation: new NetworkIsolation('test-1', async (script) => void scripts.push(script)) };
}

test('the ruleset replaces stale tables of the instance in the same transaction', () => {
  const script = isolationScript('berth-x', { interfaceName: 'podman0', subnets: ['10.88.0.0/16'] }, ['podman3'], 8788);
  const lines = script.split('\n');
  assert.deepEqual(lines.slice(0, 4), ['table inet berth-x {}', 'delete table inet berth-x', 'table bridge berth-x {}', 'delete table bridge berth-x']);
  assert.match(script, /set stack_bridges \{ type ifname; elements = \{ "podman3" \}; \}/);
  assert.match(script, /set same_bridge \{ type ifname \. ifname; elements = \{ "podman3" \. "podman3" \}; \}/);
  assert.match(script, /iifname "podman0" drop\n\s+oifname "podman0" drop/);
  assert.match(script, /ether type ip ip daddr \{ 10\.88\.0\.0\/16 \} drop/);
  // Stack services reach on the host only the gateway's port (the egress proxy); no DNS server.
  assert.match(script, /iifname @stack_bridges tcp dport 8788 accept\n\s+iifname @stack_bridges meta l4proto tcp reject with tcp reset\n\s+iifname @stack_bridges drop/);
  assert.doesNotMatch(script, /dport 53/);
});

test('without an agent bridge (network none) only the stack rules are written', () => {
  const script = isolationScript('berth-x', undefined, [], 8788);
  assert.doesNotMatch(script, /ether type ip/);
  assert.doesNotMatch(script, /oifname "/);
  assert.match(script, /set stack_bridges \{ type ifname; \}/);
});

test('IPv6 subnets of the agent network are not written into the IPv4 rules', () => {
  const script = isolationScript('berth-x', { interfaceName: 'podman0', subnets: ['fd00::/64', '10.88.0.0/16'] }, [], 8788);
  assert.match(script, /ip saddr \{ 10\.88\.0\.0\/16 \} drop/);
  assert.doesNotMatch(script, /fd00/);
});

test('a stack bridge enters and leaves both sets in one transaction', async () => {
  const { scripts, isolation } = recording();
  await isolation.install(undefined, [], 8788);
  await isolation.isolate('podman7');
  await isolation.release('podman7');
  assert.equal(scripts.length, 3);
  assert.deepEqual(scripts[1]!.trim().split('\n'), [
    'add element inet berth-test-1 same_bridge { "podman7" . "podman7" }',
    'add element inet berth-test-1 stack_bridges { "podman7" }',
  ]);
  assert.match(scripts[2]!, /delete element inet berth-test-1 stack_bridges \{ "podman7" \}\ndelete element inet berth-test-1 same_bridge/);
});

test('nothing is applied before install or after uninstall', async () => {
  const { scripts, isolation } = recording();
  await isolation.isolate('podman7');
  await isolation.uninstall();
  assert.deepEqual(scripts, []);
  await isolation.install(undefined, [], 8788);
  await isolation.uninstall();
  await isolation.release('podman7');
  await isolation.uninstall();
  assert.equal(scripts.length, 2);
  assert.match(scripts[1]!, /delete table inet berth-test-1\n.*\ndelete table bridge berth-test-1/);
});

test('interface names that could carry nft syntax are refused', async () => {
  const { isolation } = recording();
  await isolation.install(undefined, [], 8788);
  for (const name of ['podman0" drop', 'a b', '', 'x'.repeat(16), 'p;flush ruleset']) {
    await assert.rejects(isolation.isolate(name), /is not an interface name/);
  }
  assert.throws(() => isolationScript('berth-x', { interfaceName: 'bad name', subnets: [] }, [], 8788), /is not an interface name/);
});

test('from the agent bridge only the gateway port reaches the host, and nothing is forwarded', () => {
  const script = isolationScript('berth-x', { interfaceName: 'podman5', subnets: ['10.89.3.0/24'] }, [], 40123);
  const input = script.split('chain input {')[1]!.split('\n  }')[0]!;
  const agentLines = input.split('\n').map((line) => line.trim()).filter((line) => line.startsWith('iifname "podman5"'));
  // Order matters: the accept of the one port comes before the rejects of everything else.
  assert.deepEqual(agentLines, ['iifname "podman5" ct state established,related accept', 'iifname "podman5" tcp dport 40123 accept', 'iifname "podman5" meta l4proto tcp reject with tcp reset', 'iifname "podman5" reject']);
  const forward = script.split('chain forward {')[1]!.split('\n  }')[0]!;
  assert.match(forward, /iifname "podman5" drop\n\s+oifname "podman5" drop/);
});

test('a gateway port that is not a TCP port is refused', () => {
  for (const port of [0, -1, 65536, 1.5, Number.NaN]) {
    assert.throws(() => isolationScript('berth-x', { interfaceName: 'podman5', subnets: [] }, [], port), /is not a TCP port/);
  }
});
