// Where the egress proxy may connect (src/gateway/destination.ts): internal addresses refused after
// resolution, a name with one internal address among several refused whole, Berth's own addresses refused,
// the address returned is one that was checked, and the tests' override skips the checks for its names only.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import { ownAddresses, resolveDestination, type HostLookup } from '../../src/gateway/destination.js';

/** A resolver answering from a table, counting its lookups. */
function table(answers: Record<string, string[]>): HostLookup & { calls: string[] } {
  const calls: string[] = [];
  const lookup = async (host: string) => {
    calls.push(host);
    const found = answers[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(lookup, { calls });
}

const noOwn = () => new BlockList();

describe('resolveDestination', () => {
  it('refuses internal address literals: loopback, private, link-local, metadata, CGNAT, unspecified, ULA, IPv4-mapped', async () => {
    for (const address of ['127.0.0.1', '10.89.0.1', '192.168.1.1', '172.17.0.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '[::1]', 'fd00:ec2::254', 'fe80::1', '::ffff:127.0.0.1', '::ffff:a9fe:a9fe', '224.0.0.1']) {
      const destination = await resolveDestination(address, { own: noOwn, lookup: table({}) });
      assert.equal(destination.ok, false, address);
      assert.equal(!destination.ok && destination.decision, 'refused_address', address);
      assert.match(!destination.ok ? destination.reason : '', /internal address/, address);
    }
  });

  it('refuses a name when any of its addresses is internal (DNS rebinding with a mixed answer)', async () => {
    const lookup = table({ 'mixed.example': ['93.184.216.34', '127.0.0.1'], 'meta.example': ['169.254.169.254'] });
    const mixed = await resolveDestination('mixed.example', { own: noOwn, lookup });
    assert.deepEqual(mixed, { ok: false, decision: 'refused_address', reason: 'mixed.example resolves to 127.0.0.1, an internal address (loopback, private, link-local, metadata, multicast or reserved)' });
    const meta = await resolveDestination('Meta.Example.', { own: noOwn, lookup });
    assert.equal(meta.ok, false);
    assert.deepEqual(lookup.calls, ['mixed.example', 'meta.example'], 'names are resolved once, lower case, without the trailing dot');
  });

  it("refuses the host's own addresses even when they are public", async () => {
    const own = new BlockList();
    own.addAddress('93.184.216.34');
    const destination = await resolveDestination('self.example', { own: () => own, lookup: table({ 'self.example': ['93.184.216.34'] }) });
    assert.deepEqual(destination, { ok: false, decision: 'refused_address', reason: "self.example resolves to 93.184.216.34, one of Berth's own addresses" });
  });

  it('answers the address that was checked (pinned), IPv4 first', async () => {
    const lookup = table({ 'public.example': ['2606:4700::1111', '93.184.216.34'] });
    assert.deepEqual(await resolveDestination('public.example', { own: noOwn, lookup }), { ok: true, address: '93.184.216.34', family: 4 });
    assert.deepEqual(await resolveDestination('8.8.8.8', { own: noOwn, lookup }), { ok: true, address: '8.8.8.8', family: 4 });
    assert.deepEqual(lookup.calls, ['public.example'], 'an address literal is not looked up');
  });

  it('a name that does not resolve is a failure, not a refusal', async () => {
    assert.deepEqual(await resolveDestination('nowhere.example', { own: noOwn, lookup: table({}) }), { ok: false, decision: 'failed', reason: 'nowhere.example cannot be resolved (ENOTFOUND)' });
  });

  it('the override maps its names only, skipping the checks for them; other names are judged as ever', async () => {
    const override = new Map([['allowed.test', '127.0.0.1']]);
    const lookup = table({ 'other.test': ['127.0.0.1'] });
    assert.deepEqual(await resolveDestination('ALLOWED.test', { own: noOwn, override, lookup }), { ok: true, address: '127.0.0.1', family: 4 });
    assert.equal((await resolveDestination('other.test', { own: noOwn, override, lookup })).ok, false);
    assert.equal((await resolveDestination('127.0.0.1', { own: noOwn, override, lookup })).ok, false, 'the address itself stays refused');
  });
});

describe('ownAddresses', () => {
  it("holds every interface's address and reads them again only after its time to live", () => {
    let reads = 0;
    const interfaces = (): ReturnType<typeof import('node:os').networkInterfaces> => {
      reads++;
      return { eth0: [{ address: '93.184.216.34', netmask: '255.255.255.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: false, cidr: null }] };
    };
    const own = ownAddresses(60_000, interfaces);
    assert.equal(own().check('93.184.216.34', 'ipv4'), true);
    assert.equal(own().check('::ffff:93.184.216.34', 'ipv6'), true, 'its IPv4-mapped form too');
    assert.equal(own().check('93.184.216.35', 'ipv4'), false);
    assert.equal(reads, 1);
  });
});
