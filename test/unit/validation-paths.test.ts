import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateWorkdir } from '../../src/core/validation/paths.js';
import { refused } from './support/refused.js';

describe('workdir', () => {
  const allowed: [string, string][] = [
    ['/workspace', '/workspace'],
    ['/workspace/', '/workspace'],
    ['/home/agent/project', '/home/agent/project'],
    ['/srv/a-b_c.d+e@f', '/srv/a-b_c.d+e@f'],
    ['/srv/.hidden', '/srv/.hidden'],
    ['/srv/...', '/srv/...'],
    ['/srv/..x', '/srv/..x'],
    ['/opt', '/opt'],
    ['/var/lib', '/var/lib'],
    ['/root', '/root'],
    ['/home/agent/.sshx', '/home/agent/.sshx'],
    ['/etcetera', '/etcetera'],
    [`/${'a'.repeat(255)}`, `/${'a'.repeat(255)}`],
  ];
  for (const [workdir, expected] of allowed) {
    it(`allows ${workdir.length > 40 ? `${workdir.slice(0, 40)}…` : workdir}`, () => assert.equal(validateWorkdir(workdir), expected));
  }

  const rejected: [string, RegExp][] = [
    ['', /must be an absolute path/],
    ['workspace', /"workspace" must be an absolute path/],
    ['./workspace', /must be an absolute path/],
    ['~/workspace', /must be an absolute path/],
    ['/work space', /contains " "; only letters, digits and \/ \. _ - \+ @ are allowed/],
    ['/work$HOME', /contains "\$"/],
    ['/work;rm -rf', /contains ";"/],
    ['/work`id`', /contains "`"/],
    ['/work$(id)', /contains "\$"/],
    ["/work'x", /contains "'"/],
    ['/work"x', /contains """/],
    ['/work\\x', /contains "\\"/],
    ['/work*', /contains "\*"/],
    ['/work?', /contains "\?"/],
    ['/work[1]', /contains "\["/],
    ['/work{a,b}', /contains "\{"/],
    ['/work|x', /contains "\|"/],
    ['/work&x', /contains "&"/],
    ['/work>x', /contains ">"/],
    ['/work#x', /contains "#"/],
    ['/work!x', /contains "!"/],
    ['/work~x', /contains "~"/],
    ['/work,x', /contains ","/],
    ['/work=x', /contains "="/],
    ['/work:x', /contains ":"/],
    ['/work%x', /contains "%"/],
    ['/wörk', /contains "ö"/],
    ['/work\u00a0x', /contains/],
    ['/work\u0000', /control character U\+0000/],
    ['/work\nx', /control character U\+000A/],
    ['/work\tx', /control character U\+0009/],
    ['/work\u007f', /control character U\+007F/],
    ['/work/\uDC00', /not valid UTF-8/],
    ['/a/../etc', /must not contain "\.\." segments/],
    ['/a/..', /"\.\." segments/],
    ['/..', /"\.\." segments/],
    ['/a/./b', /must not contain "\." segments/],
    ['/a//b', /must not contain "\/\/"/],
    ['//etc', /must not contain "\/\/"/],
    ['/', /"\/" cannot be the working directory: it is the container's root directory/],
    ['/etc', /"\/etc" cannot be the working directory: it is \/etc, which is blocked/],
    ['/etc/', /"\/etc" cannot be the working directory/],
    ['/etc/app', /it is under \/etc/],
    ['/proc/self', /under \/proc/],
    ['/sys', /\/sys/],
    ['/dev/shm', /\/dev/],
    ['/opt/claude', /\/opt\/claude/],
    ['/opt/claude/bin', /under \/opt\/claude/],
    ['/var/lib/berth', /\/var\/lib\/berth/],
    ['/run/berth/x', /\/run\/berth/],
    ['/run/secrets', /\/run\/secrets/],
    ['/root/.claude', /~\/\.claude of a home directory/],
    ['/home/agent/.ssh', /~\/\.ssh/],
    ['/home/agent/.aws/x', /under ~\/\.aws/],
    ['/home/agent/.config/gcloud', /~\/\.config\/gcloud/],
    ['/home/x/.kube', /~\/\.kube/],
    ['/home/agent/.docker', /~\/\.docker/],
    ['/home/agent/.gnupg', /~\/\.gnupg/],
    [`/${'a'.repeat(256)}`, /name longer than 255 bytes/],
    [`/${'ab/'.repeat(1366)}`, /longer than 4096 bytes/],
  ];
  for (const [workdir, pattern] of rejected) {
    it(`refuses ${JSON.stringify(workdir.length > 40 ? `${workdir.slice(0, 40)}…` : workdir)}`, () => {
      assert.throws(() => validateWorkdir(workdir), refused(pattern));
    });
  }

  it('names the field it was given', () => {
    assert.throws(() => validateWorkdir('/etc', 'SERVICE_AGENT_DEFAULT_WORKDIR'), refused(/^SERVICE_AGENT_DEFAULT_WORKDIR: /));
    assert.throws(() => validateWorkdir('rel'), refused(/^workdir: /));
  });
});
