// container.network checked against the operator's settings (core/validation/network.ts): the default
// allowlist, open only when allowed, each listed host covered by SERVICE_EGRESS_ALLOWED_HOSTS, and under
// rootless Podman (egress not enforced) no policy but open, refused by field rather than pretended.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { validateNetwork } from '../../src/core/validation/network.js';
import { parseHostPattern, type HostPattern } from '../../src/egress-policy.js';
import type { Config } from '../../src/config.js';

function patterns(...texts: string[]): HostPattern[] {
  return texts.map((text) => {
    const pattern = parseHostPattern(text);
    if (typeof pattern === 'string') throw new Error(pattern);
    return pattern;
  });
}

function egress(overrides: Partial<Config['egress']> = {}): Pick<Config, 'egress'> {
  return { egress: { defaultAllow: patterns('pypi.org'), allowedHosts: undefined, allowOpen: false, enforced: true, ...overrides } };
}

function invalid(pattern: RegExp) {
  return (error: unknown) => {
    const e = error as { status?: number; message?: string };
    assert.equal(e.status, 400);
    assert.match(e.message ?? '', pattern);
    return true;
  };
}

describe('rootful (egress enforced)', () => {
  test('a request without network gets the operator\'s default allowlist', () => {
    assert.deepEqual(validateNetwork(undefined, egress()), { mode: 'allowlist', allow: patterns('pypi.org') });
  });

  test('an allowlist is kept, duplicates once', () => {
    const policy = validateNetwork({ mode: 'allowlist', allow: ['*.npmjs.org', 'pypi.org', '*.npmjs.org'] }, egress());
    assert.deepEqual(policy, { mode: 'allowlist', allow: patterns('*.npmjs.org', 'pypi.org') });
  });

  test('none is kept', () => {
    assert.deepEqual(validateNetwork({ mode: 'none' }, egress()), { mode: 'none' });
  });

  test('open needs SERVICE_EGRESS_ALLOW_OPEN', () => {
    assert.throws(() => validateNetwork({ mode: 'open' }, egress()), invalid(/^container\.network\.mode: .*SERVICE_EGRESS_ALLOW_OPEN/));
    assert.deepEqual(validateNetwork({ mode: 'open' }, egress({ allowOpen: true })), { mode: 'open' });
  });

  test('a host outside SERVICE_EGRESS_ALLOWED_HOSTS is refused naming its index', () => {
    const settings = egress({ allowedHosts: patterns('*.example.org') });
    assert.deepEqual(validateNetwork({ allow: ['a.example.org'] }, settings), { mode: 'allowlist', allow: patterns('a.example.org') });
    assert.throws(() => validateNetwork({ allow: ['a.example.org', 'evil.test'] }, settings), invalid(/^container\.network\.allow\[1\]: .*SERVICE_EGRESS_ALLOWED_HOSTS/));
  });

  test('allow with another mode is refused', () => {
    assert.throws(() => validateNetwork({ mode: 'none', allow: ['pypi.org'] }, egress()), invalid(/^container\.network\.allow: only with mode "allowlist"/));
  });
});

describe('rootless (egress not enforced)', () => {
  const rootless = (allowOpen: boolean) => egress({ enforced: false, allowOpen });

  test('a request without network runs open when the operator allows open', () => {
    assert.deepEqual(validateNetwork(undefined, rootless(true)), { mode: 'open' });
    assert.deepEqual(validateNetwork({ mode: 'open' }, rootless(true)), { mode: 'open' });
  });

  test('none and allowlist are refused naming container.network.mode, not pretended', () => {
    for (const mode of ['none', 'allowlist'] as const) {
      assert.throws(() => validateNetwork({ mode }, rootless(true)), invalid(/^container\.network\.mode: "\w+" cannot be enforced/));
    }
    assert.throws(() => validateNetwork({ allow: ['pypi.org'] }, rootless(true)), invalid(/^container\.network\.allow: cannot be enforced/));
  });

  test('without SERVICE_EGRESS_ALLOW_OPEN nothing runs', () => {
    assert.throws(() => validateNetwork(undefined, rootless(false)), invalid(/SERVICE_EGRESS_ALLOW_OPEN/));
  });
});
