// createBridgeWithGateway against a Podman that other clients race for subnets (side-by-side Berths, a cluster's
// nodes starting at once): a create refused with "subnet … already used" is tried again after a short pause,
// up to its attempts; any other refusal is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createBridgeWithGateway } from '../../src/runtime/podman/agent-network.js';
import { PodmanApiError, type PodmanClient } from '../../src/runtime/podman/client.js';

/** A Podman whose first `refusals` creates fail with `error`, then creates the network with a gateway. */
function racedPodman(refusals: number, error: () => Error) {
  const creates: number[] = [];
  const client = {
    async json(path: string, init: { json: { name: string } }) {
      assert.equal(path, '/networks/create');
      creates.push(Date.now());
      if (creates.length <= refusals) throw error();
      return { name: init.json.name, driver: 'bridge', internal: true, network_interface: 'podman9', subnets: [{ subnet: '10.89.9.0/24', gateway: '10.89.9.1' }] };
    },
    async jsonIfFound() {
      return undefined;
    },
    async call() {
      return undefined;
    },
  } as unknown as PodmanClient;
  return { client, creates };
}

const subnetTaken = () => new PodmanApiError(500, 'Podman POST /networks/create: 500 subnet 10.89.12.0/24 is already used on the host or by another config');

test('a subnet taken meanwhile is tried again, after a pause, until the create succeeds', async () => {
  const { client, creates } = racedPodman(5, subnetTaken);
  const network = await createBridgeWithGateway(client, 'berth-agents-x', {}, true, { adoptExisting: false });
  assert.deepEqual(network.subnets, [{ subnet: '10.89.9.0/24', gateway: '10.89.9.1' }]);
  assert.equal(creates.length, 6);
  for (let i = 1; i < creates.length; i += 1) assert.ok(creates[i]! - creates[i - 1]! >= 45, `a pause before attempt ${i + 1}`);
});

test('past its attempts, the last refusal is thrown', async () => {
  const { client, creates } = racedPodman(100, subnetTaken);
  await assert.rejects(createBridgeWithGateway(client, 'berth-agents-x', {}, true, { adoptExisting: false }), /already used/);
  assert.equal(creates.length, 8);
});

test('another refusal is not tried again', async () => {
  const { client, creates } = racedPodman(1, () => new PodmanApiError(500, 'Podman POST /networks/create: 500 netavark: out of memory'));
  await assert.rejects(createBridgeWithGateway(client, 'berth-agents-x', {}, true, { adoptExisting: false }), /out of memory/);
  assert.equal(creates.length, 1);
});
