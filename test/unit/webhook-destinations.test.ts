import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { DestinationPolicy, type Lookup } from '../../src/core/webhooks/destination-policy.js';
import { BerthError } from '../../src/errors.js';

const resolver = (answers: Record<string, string[]>): Lookup => (hostname, _options, callback) => {
  const found = answers[hostname];
  if (!found) return callback(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), []);
  callback(null, found.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 })));
};

test('every internal range is denied by default, public addresses are allowed', () => {
  const policy = new DestinationPolicy([]);
  for (const address of ['127.0.0.1', '127.9.9.9', '0.0.0.0', '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1']) {
    assert.equal(policy.allows(address, address), false, address);
  }
  for (const address of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111']) assert.equal(policy.allows(address, address), true, address);
});

test('SERVICE_WEBHOOK_ALLOWED_HOSTS admits names, addresses and CIDRs', () => {
  const policy = new DestinationPolicy(['hooks.internal', '127.0.0.1', '10.1.2.0/24', 'fd00::/8']);
  assert.equal(policy.allows('10.9.9.9', 'hooks.internal'), true);
  assert.equal(policy.allows('127.0.0.1', '127.0.0.1'), true);
  assert.equal(policy.allows('10.1.2.200', 'x.example'), true);
  assert.equal(policy.allows('10.1.3.1', 'x.example'), false);
  assert.equal(policy.allows('fd12::1', 'x.example'), true);
  assert.equal(policy.allows('169.254.169.254', 'metadata'), false);
});

test('a name is judged by every address it resolves to at submission, and by the address connected to at delivery', async () => {
  let rebinding = ['93.184.216.34'];
  const policy = new DestinationPolicy([], (hostname, options, callback) =>
    resolver({ 'public.example': ['93.184.216.34'], 'internal.example': ['10.0.0.7'], 'rebind.example': rebinding })(hostname, options, callback),
  );
  await policy.check('https://public.example/hook');
  await assert.rejects(policy.check('https://internal.example/hook'), (error: unknown) => error instanceof BerthError && error.status === 400 && /SERVICE_WEBHOOK_ALLOWED_HOSTS/.test(error.message));
  await assert.rejects(policy.check('https://nowhere.example/hook'), (error: unknown) => error instanceof BerthError && /cannot be resolved/.test(error.message));
  await policy.check('https://rebind.example/hook');
  rebinding = ['127.0.0.1'];
  const connected = await new Promise<unknown>((resolve) => policy.connectLookup()('rebind.example', { all: true }, (error, addresses) => resolve(error ?? addresses)));
  assert.match(String((connected as Error).message), /internal addresses/, 'the delivery\'s own lookup refuses the rebound name');
});
