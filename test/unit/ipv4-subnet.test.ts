// The agent network's gateway address (runtime/podman/agent-network.ts): Podman 4.3 gives an internal
// network without DNS no gateway, so Berth asks for the subnet's first address itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstHostAddress } from '../../src/runtime/podman/agent-network.js';

test('the first host address of a subnet is its gateway', () => {
  assert.equal(firstHostAddress('10.89.3.0/24'), '10.89.3.1');
  assert.equal(firstHostAddress('10.89.0.0/16'), '10.89.0.1');
  assert.equal(firstHostAddress('172.16.4.128/25'), '172.16.4.129');
  // A subnet written with host bits set still names its network's first address.
  assert.equal(firstHostAddress('10.89.3.77/24'), '10.89.3.1');
});

test('subnets without room for a gateway and IPv6 have none', () => {
  for (const cidr of ['10.0.0.0/31', '10.0.0.0/32', 'fd00::/64', '10.0.0.300/24', 'nonsense']) assert.equal(firstHostAddress(cidr), undefined);
});
