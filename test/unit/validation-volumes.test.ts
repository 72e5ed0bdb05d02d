import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { describe, it } from 'node:test';
import {
  checkContainerPath, checkDistinctTargets, mountTargetReason, parseVolumeSpec, resolveAllowedHostPath, validateVolumes,
  type HostPathPolicy, type RealpathFs,
} from '../../src/core/validation/volumes.js';
import { refused } from './support/refused.js';

/** An in-memory tree: directories, symlinks (absolute or relative targets) and paths whose access fails. */
function fakeFs(tree: { dirs?: string[]; links?: Record<string, string>; failures?: Record<string, string> }): RealpathFs {
  const dirs = new Set<string>(['/']);
  for (const dir of tree.dirs ?? []) for (let p = dir; p !== '/'; p = posix.dirname(p)) dirs.add(p);
  const links = tree.links ?? {};
  const failures = tree.failures ?? {};
  const fail = (code: string, path: string) => Object.assign(new Error(`${code}: ${path}`), { code });
  const resolve = (path: string, depth: number): string => {
    if (depth > 40) throw fail('ELOOP', path);
    let current = '/';
    for (const name of path.split('/').filter((s) => s !== '')) {
      const next = posix.join(current, name);
      if (failures[next]) throw fail(failures[next], next);
      const target = links[next];
      if (target !== undefined) current = resolve(posix.resolve(current, target), depth + 1);
      else if (dirs.has(next)) current = next;
      else throw fail('ENOENT', next);
    }
    return current;
  };
  return {
    realpath: async (path) => resolve(path, 0),
    lstat: async (path) => {
      if (dirs.has(path) || path in links) return {};
      throw fail('ENOENT', path);
    },
  };
}

const fs = fakeFs({
  dirs: ['/data/sub', '/database', '/srv/projects/a', '/etc', '/mnt/real/data/x', '/var/lib/berth-service/data', '/home/me/projects'],
  links: {
    '/data/to-etc': '/etc',
    '/data/to-sub': '/data/sub',
    '/data/relative-out': '../etc',
    '/data/relative-in': 'sub',
    '/data/dangling': '/etc/missing',
    '/data/loop': '/data/loop',
    '/alias': '/data',
    '/link-entry': '/mnt/real/data',
  },
  failures: { '/data/locked': 'EACCES' },
});

const policy: HostPathPolicy = {
  allowedVolumes: ['/data', '/srv/projects/', '/link-entry', '/home/me'],
  allowAllVolumes: false,
  protectedPaths: [{ path: '/var/lib/berth-service/data', name: 'SERVICE_DATA_DIR' }, { path: '/home/me/berth', name: 'SERVICE_AGENT_SESSIONS_DIR' }],
};

async function hostPathOf(spec: string, p: HostPathPolicy = policy): Promise<string> {
  return resolveAllowedHostPath(parseVolumeSpec(spec, 'container.volumes[0]'), p, fs);
}

describe('volume syntax', () => {
  const accepted: [string, { hostPath: string; containerPath: string; readOnly: boolean; options: string[] }][] = [
    ['/data:/work', { hostPath: '/data', containerPath: '/work', readOnly: false, options: [] }],
    ['/data//sub/:/work//x/', { hostPath: '/data/sub', containerPath: '/work/x', readOnly: false, options: [] }],
    ['/data:/work:ro', { hostPath: '/data', containerPath: '/work', readOnly: true, options: [] }],
    ['/data:/work:rw', { hostPath: '/data', containerPath: '/work', readOnly: false, options: [] }],
    ['/data:/work:ro,z,noexec,nosuid,nodev', { hostPath: '/data', containerPath: '/work', readOnly: true, options: ['z', 'noexec', 'nosuid', 'nodev'] }],
    ['/data:/work:Z', { hostPath: '/data', containerPath: '/work', readOnly: false, options: ['Z'] }],
    ['/data/ü/文件:/work/ü', { hostPath: '/data/ü/文件', containerPath: '/work/ü', readOnly: false, options: [] }],
  ];
  for (const [spec, expected] of accepted) {
    it(`accepts ${spec}`, () => {
      const { field: _field, ...parsed } = parseVolumeSpec(spec, 'container.volumes[0]');
      assert.deepEqual(parsed, expected);
    });
  }

  const rejected: [string, RegExp][] = [
    ['', /is not host_path:container_path/],
    ['/data', /is not host_path:container_path/],
    ['/data:', /container path is empty/],
    [':/work', /host path is empty/],
    ['/data:/work:', /options after the last ":" are empty/],
    ['/data:/work:ro:z', /colons inside paths are not supported/],
    ['/da:ta:/work', /container path "ta" must be an absolute path|mount option/],
    ['/a:b:/c:/d', /colons inside paths/],
    ['data:/work', /host path "data" must be an absolute path/],
    ['./data:/work', /must be an absolute path/],
    ['~/data:/work', /must be an absolute path/],
    ['/data/../etc:/work', /must not contain "\.\." segments/],
    ['/data/./sub:/work', /must not contain "\." segments/],
    ['/data/..:/work', /"\.\." segments/],
    ['/data:work', /container path "work" must be an absolute path/],
    ['/data:/work/../etc', /"\.\." segments/],
    ['/data\u0000:/work', /control character U\+0000/],
    ['/data\n:/work', /control character U\+000A/],
    ['/data:/wo\trk', /control character U\+0009/],
    ['/data/\uD800:/work', /not valid UTF-8/],
    [`/data/${'a'.repeat(256)}:/work`, /name longer than 255 bytes/],
    [`/data/${'a/'.repeat(2100)}:/work`, /longer than 4096 bytes/],
  ];
  for (const [spec, pattern] of rejected) {
    it(`refuses ${JSON.stringify(spec.length > 60 ? `${spec.slice(0, 60)}…` : spec)}`, () => {
      assert.throws(() => parseVolumeSpec(spec, 'container.volumes[0]'), refused(pattern));
    });
  }
});

describe('mount options', () => {
  const refusedOptions = ['shared', 'rshared', 'slave', 'rslave', 'private', 'rprivate', 'unbindable', 'bind-propagation=shared',
    'suid', 'dev', 'exec', 'U', 'O', 'noatime', 'relatime', 'nodiratime', 'bind', 'rbind', 'copy', 'idmap', 'RO', ' ro', 'ro ', 'unknown'];
  for (const option of refusedOptions) {
    it(`refuses ${JSON.stringify(option)}`, () => {
      assert.throws(() => parseVolumeSpec(`/data:/work:${option}`, 'container.volumes[2]'),
        refused(new RegExp(`^container\\.volumes\\[2\\]: (mount option .* is not allowed; allowed: ro, rw, z, Z, noexec, nosuid, nodev|.*control character)`)));
    });
  }
  for (const option of ['ro', 'rw', 'z', 'Z', 'noexec', 'nosuid', 'nodev']) {
    it(`accepts ${option}`, () => assert.doesNotThrow(() => parseVolumeSpec(`/data:/work:${option}`, 'container.volumes[0]')));
  }
  it('refuses ro with rw', () => assert.throws(() => parseVolumeSpec('/data:/work:ro,rw', 'v'), refused(/"ro" and "rw" contradict/)));
  it('refuses z with Z', () => assert.throws(() => parseVolumeSpec('/data:/work:Z,z', 'v'), refused(/"z" and "Z" contradict/)));
  it('refuses a duplicate option', () => assert.throws(() => parseVolumeSpec('/data:/work:ro,nodev,ro', 'v'), refused(/"ro" is given twice/)));
  it('refuses an empty option between commas', () => assert.throws(() => parseVolumeSpec('/data:/work:ro,,z', 'v'), refused(/mount option "" is not allowed/)));
});

describe('host path allowlist', () => {
  const allowed: [string, string][] = [
    ['/data:/w', '/data'],
    ['/data/:/w', '/data'],
    ['//data//sub:/w', '/data/sub'],
    ['/data/to-sub:/w', '/data/sub'],
    ['/data/relative-in:/w', '/data/sub'],
    ['/alias/sub:/w', '/data/sub'],
    ['/data/missing:/w', '/data/missing'],
    ['/data/missing/deeper:/w', '/data/missing/deeper'],
    ['/data/to-sub/missing:/w', '/data/sub/missing'],
    ['/srv/projects:/w', '/srv/projects'],
    ['/srv/projects/a:/w', '/srv/projects/a'],
    ['/link-entry/x:/w', '/mnt/real/data/x'],
    ['/mnt/real/data:/w', '/mnt/real/data'],
    ['/home/me/projects:/w', '/home/me/projects'],
  ];
  for (const [spec, expected] of allowed) {
    it(`allows ${spec} as ${expected}`, async () => assert.equal(await hostPathOf(spec), expected));
  }

  const rejected: [string, RegExp][] = [
    ['/database:/w', /^container\.volumes\[0\]: host path "\/database" is not in SERVICE_AGENT_ALLOWED_VOLUMES$/],
    ['/etc:/w', /host path "\/etc" is not in SERVICE_AGENT_ALLOWED_VOLUMES/],
    ['/:/w', /host path "\/" overlaps Berth's own files/],
    ['/srv:/w', /not in SERVICE_AGENT_ALLOWED_VOLUMES/],
    ['/srv/projectsX:/w', /not in SERVICE_AGENT_ALLOWED_VOLUMES/],
    ['/mnt/real:/w', /not in SERVICE_AGENT_ALLOWED_VOLUMES/],
    ['/data/to-etc:/w', /host path "\/data\/to-etc" resolves to "\/etc", which is not in SERVICE_AGENT_ALLOWED_VOLUMES/],
    ['/data/to-etc/passwd:/w', /resolves to "\/etc\/passwd"/],
    ['/data/relative-out:/w', /resolves to "\/etc"/],
    ['/data/to-etc/missing/deeper:/w', /resolves to "\/etc\/missing\/deeper"/],
    ['/data/dangling:/w', /is a symbolic link whose target does not exist/],
    ['/data/dangling/x:/w', /is a symbolic link whose target does not exist/],
    ['/data/locked:/w', /cannot be resolved \(EACCES\)/],
    ['/data/locked/x:/w', /cannot be resolved \(EACCES\)/],
    ['/data/loop:/w', /cannot be resolved \(ELOOP\)/],
    ['/home/me:/w', /overlaps Berth's own files \(SERVICE_AGENT_SESSIONS_DIR\)/],
    ['/home/me/berth/sessions:/w', /overlaps Berth's own files/],
  ];
  for (const [spec, pattern] of rejected) {
    it(`refuses ${spec}`, async () => assert.rejects(hostPathOf(spec), refused(pattern)));
  }

  it('refuses every mount when the allowlist is empty', async () => {
    await assert.rejects(hostPathOf('/data:/w', { ...policy, allowedVolumes: [] }),
      refused(/^container\.volumes\[0\]: volume mounts are disabled on this server \(SERVICE_AGENT_ALLOWED_VOLUMES is empty\)$/));
  });
  it('allows any resolvable path with SERVICE_AGENT_ALLOW_ALL_VOLUMES', async () => {
    assert.equal(await hostPathOf('/data/to-etc:/w', { ...policy, allowedVolumes: [], allowAllVolumes: true }), '/etc');
  });
  it('still protects Berth\'s own files with SERVICE_AGENT_ALLOW_ALL_VOLUMES', async () => {
    const all = { ...policy, allowAllVolumes: true };
    await assert.rejects(hostPathOf('/var/lib/berth-service:/w', all), refused(/overlaps Berth's own files \(SERVICE_DATA_DIR\)/));
    await assert.rejects(hostPathOf('/var/lib/berth-service/data/jobs.db:/w', all), refused(/SERVICE_DATA_DIR/));
  });
  it('still refuses dangling symlinks with SERVICE_AGENT_ALLOW_ALL_VOLUMES', async () => {
    await assert.rejects(hostPathOf('/data/dangling:/w', { ...policy, allowAllVolumes: true }), refused(/symbolic link/));
  });
  it('treats a missing path as missing when the fake has no lstat', async () => {
    const bare: RealpathFs = { realpath: fs.realpath };
    const spec = parseVolumeSpec('/data/new:/w', 'v');
    assert.equal(await resolveAllowedHostPath(spec, policy, bare), '/data/new');
  });
});

describe('container path blocklist', () => {
  const allowed = ['/workspace', '/data', '/home/agent', '/home/agent/project', '/home/agent/.sshx', '/home/agent/.claude-notes',
    '/home/agent/.config', '/home/agent/.config/other', '/root', '/root/project', '/opt/tools', '/opt/claudette', '/etcetera', '/devices',
    '/proc2', '/system', '/var/lib/other', '/var/lib/berthold', '/run/other', '/run/secretsx', '/home/.ssh', '/srv/etc'];
  for (const path of allowed) {
    it(`allows ${path}`, () => assert.doesNotThrow(() => checkContainerPath(parseVolumeSpec(`/data:${path}`, 'v'))));
  }
  const blocked = ['/', '//', '/etc', '/etc/', '//etc', '/etc/ssl/certs', '/proc', '/proc/1/root', '/sys', '/sys/fs/cgroup', '/dev', '/dev/shm',
    '/opt/claude', '/opt/claude/bin', '/var/lib/berth', '/var/lib/berth/projects', '/run/berth', '/run/secrets', '/run/secrets/token',
    '/root/.claude', '/root/.ssh', '/root/.aws/credentials', '/home/agent/.claude', '/home/agent/.claude.json', '/home/agent/.ssh',
    '/home/bob/.ssh/id_ed25519', '/home/agent/.aws', '/home/agent/.config/gcloud', '/home/agent/.config/gcloud/x', '/home/agent/.kube',
    '/home/agent/.docker', '/home/agent/.gnupg', '/opt', '/var', '/var/lib', '/run'];
  for (const path of blocked) {
    it(`refuses ${path}`, () => {
      assert.throws(() => checkContainerPath(parseVolumeSpec(`/data:${path}`, 'container.volumes[3]')),
        refused(/^container\.volumes\[3\]: container path ".*" cannot be mounted on: /));
    });
  }
  it('names the blocked root in the reason', () => {
    assert.equal(mountTargetReason('/etc/ssl'), 'it is under /etc, which is blocked');
    assert.equal(mountTargetReason('/home/agent/.ssh'), 'it is ~/.ssh of a home directory, which is blocked');
    assert.equal(mountTargetReason('/var'), 'it contains /var/lib/berth, where Berth mounts its own files');
  });
  it('refuses two volumes on one container path', () => {
    const specs = ['/data:/w', '/data/sub:/w/'].map((spec, i) => parseVolumeSpec(spec, `container.volumes[${i}]`));
    assert.throws(() => checkDistinctTargets(specs), refused(/^container\.volumes\[1\]: container path "\/w" is already used by container\.volumes\[0\]$/));
  });
});

describe('validateVolumes', () => {
  it('returns mounts with resolved host paths and options without ro/rw', async () => {
    const mounts = await validateVolumes(['/data/to-sub:/work:ro,nodev', '/srv/projects/a:/src'], policy, fs);
    assert.deepEqual(mounts, [
      { hostPath: '/data/sub', containerPath: '/work', readOnly: true, options: ['nodev'] },
      { hostPath: '/srv/projects/a', containerPath: '/src', readOnly: false, options: [] },
    ]);
  });
  it('returns no mounts for no volumes', async () => assert.deepEqual(await validateVolumes(undefined, policy, fs), []));
  it('checks host paths before container paths', async () => {
    await assert.rejects(validateVolumes(['/etc:/etc'], policy, fs), refused(/host path "\/etc" is not in/));
  });
});

describe('relabelling (z/Z)', () => {
  const fs = fakeFs({ dirs: ['/srv/projects/app'] });
  it('is refused unless the operator allows it, naming the volume and the setting', async () => {
    for (const option of ['z', 'Z']) {
      await assert.rejects(
        validateVolumes([`/srv/projects/app:/mnt/app:${option}`], policy, fs),
        refused(/container\.volumes\[0\].*"(z|Z)".*SERVICE_AGENT_ALLOW_RELABEL/),
      );
    }
  });
  it('is accepted with SERVICE_AGENT_ALLOW_RELABEL', async () => {
    const [mount] = await validateVolumes(['/srv/projects/app:/mnt/app:z'], { ...policy, allowRelabel: true }, fs);
    assert.deepEqual(mount?.options, ['z']);
  });
});
