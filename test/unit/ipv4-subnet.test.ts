// IPv4 subnet arithmetic (src/ipv4-subnet.ts): the agent network's gateway (Podman 4.3 gives an internal
// network without DNS no gateway, so Berth asks for the subnet's first address) and stack services' fixed addresses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstHostAddress, hostAddressFromTop } from '../../src/ipv4-subnet.js';

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

test('stack services get addresses counted down from the top of the subnet, never the broadcast or the gateway', () => {
  assert.equal(hostAddressFromTop('10.89.3.0/24', 0), '10.89.3.254');
  assert.equal(hostAddressFromTop('10.89.3.0/24', 3), '10.89.3.251');
  assert.equal(hostAddressFromTop('10.89.0.0/16', 0), '10.89.255.254');
  assert.equal(hostAddressFromTop('10.89.3.0/24', 252), '10.89.3.2');
  // .1 is the gateway: there is no 254th address below the top.
  assert.equal(hostAddressFromTop('10.89.3.0/24', 253), undefined);
  assert.equal(hostAddressFromTop('10.0.0.0/30', 0), '10.0.0.2');
  assert.equal(hostAddressFromTop('10.0.0.0/30', 1), undefined);
  for (const bad of [-1, 0.5]) assert.equal(hostAddressFromTop('10.89.3.0/24', bad), undefined);
  assert.equal(hostAddressFromTop('fd00::/64', 0), undefined);
});
