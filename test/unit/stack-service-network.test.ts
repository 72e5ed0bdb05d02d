// How a compose stack's services find each other and the way out (core/compose/service-network.ts), and
// who may connect to the gateway (gateway/client-subnets.ts). The effect on real containers is tested in
// test/integration/attack-stack-egress.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serviceAddresses, serviceHostEntries, serviceProxyEnvironment, stackGrantId } from '../../src/core/compose/service-network.js';
import { ClientSubnets } from '../../src/gateway/client-subnets.js';
import { BerthError } from '../../src/errors.js';

test('services get fixed addresses from the top of the subnet, in the definition\'s order, and every container names them all', () => {
  const addresses = serviceAddresses('10.89.7.0/24', ['db', 'cache', 'queue']);
  assert.deepEqual([...addresses], [['db', '10.89.7.254'], ['cache', '10.89.7.253'], ['queue', '10.89.7.252']]);
  assert.deepEqual(serviceHostEntries(addresses), [
    { host: 'db', address: '10.89.7.254' },
    { host: 'cache', address: '10.89.7.253' },
    { host: 'queue', address: '10.89.7.252' },
  ]);
});

test('a subnet without room for every service fails the stack, naming the service', () => {
  assert.throws(
    () => serviceAddresses('10.0.0.0/29', ['a', 'b', 'c', 'd', 'e', 'f']),
    (error: unknown) => error instanceof BerthError && error.code === 'BERTH_ERR_STACK_FAILED' && /service "f"/.test(error.message),
  );
});

test('services get the proxy in both spellings; their own names and subnet go direct; a compose NO_PROXY is kept after', () => {
  const env = serviceProxyEnvironment({ gateway: '10.89.7.1', port: 8788, token: 'brt_abc' }, ['db', 'cache'], '10.89.7.0/24', { NO_PROXY: 'internal.example' });
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) assert.equal(env[name], 'http://berth:brt_abc@10.89.7.1:8788');
  assert.equal(env.NO_PROXY, 'localhost,127.0.0.1,10.89.7.0/24,db,cache,internal.example');
  assert.equal(env.no_proxy, env.NO_PROXY);
  assert.equal(serviceProxyEnvironment({ gateway: '10.89.7.1', port: 1, token: 't' }, [], '10.89.7.0/24', {}).NO_PROXY, 'localhost,127.0.0.1,10.89.7.0/24');
});

test('the stack\'s grant is named after its network', () => {
  assert.equal(stackGrantId('0b9e…'), 'berth-stack-0b9e…');
});

test('the gateway admits a stack\'s subnet while the stack exists, the agent subnets always', () => {
  const clients = new ClientSubnets(['10.89.0.0/24']);
  assert.equal(clients.check('10.89.0.5', 'ipv4'), true);
  assert.equal(clients.check('10.89.9.5', 'ipv4'), false);
  clients.admit('10.89.9.0/24');
  assert.equal(clients.check('10.89.9.5', 'ipv4'), true);
  // Admitted twice (a subnet reused before the old stack was forgotten): held until forgotten twice.
  clients.admit('10.89.9.0/24');
  clients.forget('10.89.9.0/24');
  assert.equal(clients.check('10.89.9.5', 'ipv4'), true);
  clients.forget('10.89.9.0/24');
  assert.equal(clients.check('10.89.9.5', 'ipv4'), false);
  // Forgetting what was never admitted changes nothing.
  clients.forget('10.89.0.0/24');
  assert.equal(clients.check('10.89.0.5', 'ipv4'), true);
  assert.equal(clients.check('192.168.1.2', 'ipv4'), false);
});
