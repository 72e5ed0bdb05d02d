// The pure parts of POST /workspaces {"git"}: which URLs, refs and secret names pass (core/workspaces/
// git-source.ts), and the command the clone container runs (git-command.ts). The integration test
// (workspaces-git.test.ts) performs the attacks against a real Berth.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { checkGitRef, checkGitRequest, checkGitUrl } from '../../src/core/workspaces/git-source.js';
import { CLONE_TREE, cloneArguments, cloneCommand, failureLine } from '../../src/core/workspaces/git-command.js';

const policy = { reservedSecrets: ['engine-key'] };

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof BerthError);
    assert.equal(error.status, 400);
    return error.message;
  }
  assert.fail('not refused');
}

describe('git.url', () => {
  it('accepts URLs of https, http, git and ssh as given', () => {
    for (const url of ['https://github.com/o/r.git', 'http://10.88.0.1:8080/r.git', 'git://example.com/r', 'ssh://git@example.com:2222/o/r.git', 'https://token@example.com/r', 'https://[::1]/r.git']) {
      assert.equal(checkGitUrl(url), url);
    }
  });

  it('refuses other transports, local paths, options, control characters, passwords and odd characters, naming git.url', () => {
    for (const url of [
      'ext::sh -c touch% /tmp/pwned', 'ext::sh', 'EXT::sh', 'fd::0', 'file:///etc', 'FILE:///etc', '/etc', './repo', '../repo', 'repo',
      '--upload-pack=touch /tmp/x', '-uhttp://x/y', 'http://a/b\n--upload-pack=x', 'http://a/b\tc', 'http://a/\u0000', 'git@example.com:o/r.git',
      'https://u:p@example.com/r', 'http://example.com\\@evil/r', 'https://exämple.com/r', 'ftp://example.com/r', 'http:///path', 'https://-oProxyCommand=x/r', 'ssh://-oProxyCommand=x/r', 'ssh://-oProxyCommand=x@h/r', '',
      `https://example.com/${'a'.repeat(2100)}`,
    ]) {
      assert.match(refusal(() => checkGitUrl(url)), /^git\.url: /, JSON.stringify(url));
    }
  });
});

describe('git.ref', () => {
  it('accepts branch and tag names', () => {
    for (const ref of ['main', 'feature/x-1', 'v1.2.3', 'release_2026', 'a@b', 'ünïcode']) assert.equal(checkGitRef(ref), ref);
  });

  it('refuses what git check-ref-format refuses, and a leading -', () => {
    for (const ref of ['', '-x', '--upload-pack=x', 'a..b', 'a b', 'a\nb', 'a~1', 'a^', 'a:b', 'a?', 'a*', 'a[', 'a\\b', '@', 'a@{1}', 'a.', '/a', 'a/', 'a//b', '.a', 'a/.b', 'a.lock', 'a/b.lock/c', 'x'.repeat(256)]) {
      assert.match(refusal(() => checkGitRef(ref)), /^git\.ref: /, JSON.stringify(ref));
    }
  });
});

describe('git.secret', () => {
  it('must be a usable secret name that Berth does not reserve', () => {
    assert.equal(checkGitRequest({ url: 'https://h/r', secret: 'token-1' }, policy).secret, 'token-1');
    assert.match(refusal(() => checkGitRequest({ url: 'https://h/r', secret: 'engine-key' }, policy)), /^git\.secret: .*reserved/);
    assert.match(refusal(() => checkGitRequest({ url: 'https://h/r', secret: 'berth-offline-key' }, policy)), /^git\.secret: .*reserved/);
    assert.match(refusal(() => checkGitRequest({ url: 'https://h/r', secret: '../x' }, policy)), /^git\.secret: .*not a valid secret name/);
  });
});

describe('the clone command', () => {
  it('allows only the network protocols, runs no hook, and puts the URL after --', () => {
    const args = cloneArguments({ url: 'https://h/r.git', ref: 'main', secret: undefined });
    const config = args.flatMap((arg, i) => (args[i - 1] === '-c' ? [arg] : []));
    assert.deepEqual(config.slice(0, 7), ['protocol.allow=never', 'protocol.https.allow=always', 'protocol.http.allow=always', 'protocol.git.allow=always', 'protocol.ssh.allow=always', 'core.hooksPath=/dev/null', 'credential.helper=']);
    assert.deepEqual(args.slice(args.indexOf('clone')), ['clone', '--depth', '1', '--branch', 'main', '--no-recurse-submodules', '--', 'https://h/r.git', CLONE_TREE]);
  });

  it('with a secret: a helper that reads the secret file, and no redirects; the value itself is nowhere in the command', () => {
    const command = cloneCommand({ url: 'https://h/r.git', ref: undefined, secret: 'token-1' });
    const helper = command.find((arg) => arg.startsWith('credential.helper=!'));
    assert.ok(helper?.includes('/run/berth/git-credential'));
    assert.ok(command.includes('http.followRedirects=false'));
    assert.ok(!command.includes('--branch'));
  });

  it('reports git\'s last non-empty line, printable and bounded', () => {
    assert.equal(failureLine("Cloning into '/workspace-tree'...\nfatal: repository not found\n\n"), 'fatal: repository not found');
    assert.equal(failureLine('fatal: \u001b[31mred\u001b[0m'), 'fatal: [31mred[0m');
    assert.equal(failureLine(''), 'git said nothing');
    assert.equal(failureLine('x'.repeat(600)).length, 501);
  });
});

describe('a clone container a killed Berth left', () => {
  it('is removed by the reaper at the next start, like every container of the instance', async () => {
    const { reapLeftovers } = await import('../../src/core/reaper.js');
    const { INSTANCE_LABEL } = await import('../../src/runtime/container-runtime.js');
    const { WORKSPACE_CLONE_LABEL } = await import('../../src/core/workspaces/git-clone.js');
    const pino = (await import('pino')).default;
    const clone = { id: 'c1', names: ['berth-clone-x'], labels: { [INSTANCE_LABEL]: 'i1', [WORKSPACE_CLONE_LABEL]: 'ws', 'berth.kind': 'workspace-clone' } };
    const removed: string[] = [];
    const runtime = {
      listContainers: async (label: string) => (label === `${INSTANCE_LABEL}=i1` ? [clone] : []),
      removeContainer: async (id: string) => void removed.push(id),
    };
    const count = await reapLeftovers(runtime as never, 'i1', pino({ level: 'silent' }));
    assert.equal(count, 1);
    assert.deepEqual(removed, ['c1']);
  });
});
