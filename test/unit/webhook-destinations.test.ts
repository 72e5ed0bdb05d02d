// The webhook destination rule (core/webhooks/destination-policy.ts): which addresses are internal, what
// SERVICE_WEBHOOK_ALLOWED_HOSTS admits, the 400 at submission and the delivery's own, pinned lookup.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { DestinationPolicy, type Lookup } from '../../src/core/webhooks/destination-policy.js';
import { refused } from './support/refused.js';

/** A resolver answering from a table; a function value answers anew on each lookup. */
function resolver(answers: Record<string, string[] | (() => string[])>): Lookup {
  return (hostname, _options, callback) => {
    const entry = answers[hostname];
    if (entry === undefined) return callback(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), []);
    const found = typeof entry === 'function' ? entry() : entry;
    callback(null, found.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
}

/** The delivery's connect lookup, as net.connect calls it; resolves to the addresses or the error. */
function connectLookup(policy: DestinationPolicy, hostname: string, all = true): Promise<unknown> {
  return new Promise((resolve) =>
    policy.connectLookup()(hostname, { all }, (error: unknown, addresses: unknown, family: unknown) => resolve(error ?? (all ? addresses : { address: addresses, family }))),
  );
}

/** A 400 about the webhook_url field whose message also matches `pattern`. */
const refusedWebhookUrl = (pattern: RegExp) => (error: unknown) => refused(/^webhook_url: /)(error) && refused(pattern)(error);

describe('internal addresses are denied by default', () => {
  const policy = new DestinationPolicy([]);
  const denied = (addresses: string[]) => {
    for (const address of addresses) assert.equal(policy.allows(address, address), false, address);
  };
  const allowed = (addresses: string[]) => {
    for (const address of addresses) assert.equal(policy.allows(address, address), true, address);
  };

  it('loopback: 127/8 and ::1', () => denied(['127.0.0.1', '127.0.0.0', '127.255.255.255', '127.9.9.9', '::1']));
  it('unspecified: 0.0.0.0 (and 0/8) and ::', () => denied(['0.0.0.0', '0.1.2.3', '::']));
  it('link-local: 169.254/16 with the metadata address, and fe80::/10', () => {
    denied(['169.254.169.254', '169.254.0.1', '169.254.255.255', 'fe80::1', 'febf:ffff::1']);
    allowed(['169.253.255.255', '169.255.0.1']);
  });
  it('private: 10/8, 172.16/12, 192.168/16 and fc00::/7', () => {
    denied(['10.0.0.1', '10.255.255.255', '172.16.0.0', '172.16.5.4', '172.31.255.255', '192.168.0.1', '192.168.255.255', 'fc00::1', 'fd00::1', 'fdff:ffff::1']);
    allowed(['9.255.255.255', '11.0.0.0', '172.15.255.255', '172.32.0.1', '192.167.255.255', '192.169.0.1', 'fe00::1']);
  });
  it('CGNAT: 100.64/10', () => {
    denied(['100.64.0.1', '100.127.255.255']);
    allowed(['100.63.255.255', '100.128.0.1']);
  });
  it('multicast, reserved and broadcast: 224/4, 240/4, 255.255.255.255 and ff00::/8', () => {
    denied(['224.0.0.1', '239.255.255.255', '240.0.0.1', '255.255.255.255', 'ff02::1']);
    allowed(['223.255.255.255']);
  });
  it('IPv4-mapped IPv6 forms are judged as the IPv4 address, in dotted and hexadecimal spelling', () => {
    denied(['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', '::ffff:192.168.1.1', '::ffff:0.0.0.0']);
    allowed(['::ffff:93.184.216.34']);
  });
  it('IPv4-compatible and NAT64 forms of internal addresses are denied', () => denied(['::7f00:1', '::127.0.0.1', '64:ff9b::a9fe:a9fe']));
  it('public addresses are allowed', () => allowed(['93.184.216.34', '8.8.8.8', '1.1.1.1', '2606:4700::1111', '2001:4860:4860::8888']));
});

describe('SERVICE_WEBHOOK_ALLOWED_HOSTS', () => {
  const policy = new DestinationPolicy(['Hooks.Internal', '127.0.0.1', '10.1.2.0/24', 'fd00::/8']);

  it('a host name admits any address of exactly that URL host, whatever its case', () => {
    assert.equal(policy.allows('10.9.9.9', 'hooks.internal'), true);
    assert.equal(policy.allows('127.0.0.1', 'HOOKS.INTERNAL'), true);
    assert.equal(policy.allows('10.9.9.9', 'other.hooks.internal'), false, 'no subdomains');
    assert.equal(policy.allows('10.9.9.9', 'hooks.internal.evil.example'), false);
  });

  it('an IP admits that address only, in its IPv4-mapped spelling too', () => {
    assert.equal(policy.allows('127.0.0.1', 'localhost'), true);
    assert.equal(policy.allows('::ffff:127.0.0.1', 'x.example'), true);
    assert.equal(policy.allows('::ffff:7f00:1', '[::ffff:7f00:1]'), true);
    assert.equal(policy.allows('127.0.0.2', 'x.example'), false);
    assert.equal(policy.allows('::1', 'localhost'), false);
  });

  it('a CIDR admits the addresses inside it', () => {
    assert.equal(policy.allows('10.1.2.0', 'x.example'), true);
    assert.equal(policy.allows('10.1.2.255', 'x.example'), true);
    assert.equal(policy.allows('10.1.3.1', 'x.example'), false);
    assert.equal(policy.allows('fd12::1', 'x.example'), true);
    assert.equal(policy.allows('fc00::1', 'x.example'), false);
  });

  it('admits nothing else: metadata stays denied', () => {
    assert.equal(policy.allows('169.254.169.254', 'metadata'), false);
    assert.equal(policy.allows('169.254.169.254', '169.254.169.254'), false);
  });
});

describe('at submission', () => {
  const policy = new DestinationPolicy(['hooks.internal'], resolver({
    'public.example': ['93.184.216.34', '2606:4700::1111'],
    'internal.example': ['10.0.0.7'],
    'mixed.example': ['93.184.216.34', '169.254.169.254'],
    'hooks.internal': ['10.0.0.8'],
    'empty.example': [],
  }));

  it('a public name or address is accepted', async () => {
    await policy.check('https://public.example/hook');
    await policy.check('https://93.184.216.34/hook');
    await policy.check('https://[2606:4700::1111]/hook');
  });

  it('a literal internal address is a 400 naming webhook_url and the setting', async () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/x', 'http://[::ffff:127.0.0.1]/x', 'http://2130706433/x', 'http://0x7f.1/x']) {
      await assert.rejects(policy.check(url), refusedWebhookUrl(/internal address.*SERVICE_WEBHOOK_ALLOWED_HOSTS/), url);
    }
  });

  it('a name that resolves to an internal address is a 400 naming that address', async () => {
    await assert.rejects(policy.check('https://internal.example/hook'), refusedWebhookUrl(/resolves to 10\.0\.0\.7/));
  });

  it('a name with any internal address among public ones is a 400', async () => {
    await assert.rejects(policy.check('https://mixed.example/hook'), refusedWebhookUrl(/resolves to 169\.254\.169\.254/));
  });

  it('a name that cannot be resolved is a 400', async () => {
    await assert.rejects(policy.check('https://nowhere.example/hook'), refusedWebhookUrl(/cannot be resolved \(ENOTFOUND\)/));
    await assert.rejects(policy.check('https://empty.example/hook'), refusedWebhookUrl(/cannot be resolved/));
  });

  it('an allowed name is accepted though it resolves internally', async () => {
    await policy.check('https://hooks.internal/hook');
  });
});

describe('at delivery (the connect lookup)', () => {
  it('answers exactly the checked addresses, so the socket connects to nothing else', async () => {
    const policy = new DestinationPolicy([], resolver({ 'public.example': ['93.184.216.34', '2606:4700::1111'] }));
    assert.deepEqual(await connectLookup(policy, 'public.example'), [
      { address: '93.184.216.34', family: 4 },
      { address: '2606:4700::1111', family: 6 },
    ]);
    assert.deepEqual(await connectLookup(policy, 'public.example', false), { address: '93.184.216.34', family: 4 });
  });

  it('a resolver that answers public at submission and private at delivery (DNS rebinding) is refused', async () => {
    const answers = [['93.184.216.34'], ['127.0.0.1']];
    let lookups = 0;
    const policy = new DestinationPolicy([], resolver({ 'rebind.example': () => answers[Math.min(lookups++, answers.length - 1)]! }));
    await policy.check('https://rebind.example/hook');
    const connected = await connectLookup(policy, 'rebind.example');
    assert.ok(connected instanceof Error, 'the delivery\'s lookup fails');
    assert.equal((connected as NodeJS.ErrnoException).code, 'EDESTINATIONDENIED');
    assert.match(connected.message, /rebind\.example resolves to 127\.0\.0\.1, an internal address/);
    assert.equal(lookups, 2, 'the delivery resolved the name itself');
  });

  it('a resolver that adds a private address to a public one at delivery is refused', async () => {
    const policy = new DestinationPolicy([], resolver({ 'rebind.example': ['93.184.216.34', '10.0.0.1'] }));
    assert.equal(((await connectLookup(policy, 'rebind.example')) as NodeJS.ErrnoException).code, 'EDESTINATIONDENIED');
  });

  it('a resolution error reaches the socket unchanged', async () => {
    const policy = new DestinationPolicy([], resolver({}));
    assert.equal(((await connectLookup(policy, 'nowhere.example')) as NodeJS.ErrnoException).code, 'ENOTFOUND');
  });
});
