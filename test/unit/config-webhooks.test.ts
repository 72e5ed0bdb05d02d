// SERVICE_WEBHOOK_ALLOWED_HOSTS as config.ts reads it: a list of host names, IPs and CIDRs, each checked
// at start; an entry that is none of these stops the start with an error naming the variable.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';

const VARIABLE = 'SERVICE_WEBHOOK_ALLOWED_HOSTS';

function allowedHosts(value: string | undefined): readonly string[] {
  return loadConfig({ SERVICE_AUTH_ENABLED: 'false', ...(value === undefined ? {} : { [VARIABLE]: value }) }).webhooks.allowedHosts;
}

describe(VARIABLE, () => {
  it('is empty by default: nothing internal is allowed', () => {
    assert.deepEqual(allowedHosts(undefined), []);
    assert.deepEqual(allowedHosts(''), []);
  });

  it('reads host names, IPv4 and IPv6 addresses and CIDRs, trimmed', () => {
    assert.deepEqual(allowedHosts(' 127.0.0.1, 10.1.2.0/24 ,hooks.internal,::1,fd00::/8,localhost'), ['127.0.0.1', '10.1.2.0/24', 'hooks.internal', '::1', 'fd00::/8', 'localhost']);
  });

  it('stops the start on an entry that is neither a host name, an IP nor a CIDR', () => {
    for (const entry of ['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/8/8', 'hooks.internal/24', 'http://hooks.internal', 'hooks.internal:8080', '*.internal', 'under_score.example', 'fe80::1%eth0', '1.2.3', '0x7f.1', '-bad.example']) {
      assert.throws(
        () => allowedHosts(`127.0.0.1,${entry}`),
        (error: unknown) => error instanceof ConfigError && error.variable === VARIABLE && error.message.startsWith(`${VARIABLE}: "${entry}"`),
        entry,
      );
    }
  });
});
