// A git clone's egress policy (core/workspaces/git-egress.ts): exactly the URL's host and port, within
// SERVICE_EGRESS_ALLOWED_HOSTS, and no raw TCP transport (ssh, git://), which the proxy cannot carry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cloneEgressPolicy } from '../../src/core/workspaces/git-egress.js';
import { parseHostPattern, policyAdmits, type HostPattern } from '../../src/egress-policy.js';
import { refused } from './support/refused.js';

function pattern(text: string): HostPattern {
  const parsed = parseHostPattern(text);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
}

test('an https clone reaches its host on 443 and nothing else', () => {
  const policy = cloneEgressPolicy('https://github.com/org/repo.git', undefined);
  assert.ok(policyAdmits(policy, 'github.com', 443));
  assert.ok(!policyAdmits(policy, 'api.github.com', 443));
  assert.ok(!policyAdmits(policy, 'evil.test', 443));
});

test('an explicit port is the only port', () => {
  const policy = cloneEgressPolicy('http://git.test:8080/repo.git', undefined);
  assert.ok(policyAdmits(policy, 'git.test', 8080));
  assert.ok(!policyAdmits(policy, 'git.test', 443));
});

test('ssh and git:// are refused naming git.url', () => {
  assert.throws(() => cloneEgressPolicy('ssh://git@github.com/org/repo.git', undefined), refused(/^git\.url: ssh cannot pass the egress proxy; use https/));
  assert.throws(() => cloneEgressPolicy('git://github.com/org/repo.git', undefined), refused(/^git\.url: git cannot pass/));
});

test('the host must be among SERVICE_EGRESS_ALLOWED_HOSTS when set', () => {
  const allowed = [pattern('*.example.org'), pattern('git.test:8080')];
  assert.doesNotThrow(() => cloneEgressPolicy('https://code.example.org/r.git', allowed));
  assert.doesNotThrow(() => cloneEgressPolicy('http://git.test:8080/r.git', allowed));
  assert.throws(() => cloneEgressPolicy('https://github.com/r.git', allowed), refused(/^git\.url: "github\.com" is not among .*SERVICE_EGRESS_ALLOWED_HOSTS/));
  assert.throws(() => cloneEgressPolicy('http://git.test:9090/r.git', allowed), refused(/SERVICE_EGRESS_ALLOWED_HOSTS/));
});
