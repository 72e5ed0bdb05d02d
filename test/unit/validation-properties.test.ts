// Properties of the volume and path rules, on generated paths and on a real directory tree with symlinks
// that point out of the allowed tree. The oracles below are written independently of the validator.
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { BerthError } from '../../src/errors.js';
import { validateWorkdir } from '../../src/core/validation/paths.js';
import { checkContainerPath, parseVolumeSpec, validateVolumes, type HostPathPolicy } from '../../src/core/validation/volumes.js';

const BLOCKED = /^\/(?:etc|proc|sys|dev|opt\/claude|var\/lib\/berth|run\/berth|run\/secrets)(?:\/|$)/;
const BLOCKED_IN_HOME = /^\/(?:root|home\/[^/]+)\/(?:\.claude|\.claude\.json|\.ssh|\.aws|\.config\/gcloud|\.kube|\.docker|\.gnupg)(?:\/|$)/;
const BERTH_MOUNTS = ['/opt/claude', '/var/lib/berth', '/run/berth', '/run/secrets'];

function isBlocked(path: string): boolean {
  return path === '/' || BLOCKED.test(path) || BLOCKED_IN_HOME.test(path);
}

function within(path: string, root: string): boolean {
  const relative = posix.relative(root, path);
  return relative === '' || (!relative.startsWith('..') && !posix.isAbsolute(relative));
}

function onlyBerthErrors(error: unknown): void {
  if (!(error instanceof BerthError) || error.status !== 400) throw error;
}

const NAMES = ['allowed', 'outside', 'sub', 'deep', 'file.txt', 'missing', 'allowedness', 'link-out', 'link-rel-out', 'link-etc', 'link-root',
  'link-in', 'link-up', 'link-up2', 'dangling-out', 'dangling-in', 'loop', 'chain1', 'link-prefix', 'unicodé-out', 'alias', 'link-back',
  '..', '.', '', 'ü', '文件', '🚀', 'a'.repeat(255), 'b'.repeat(300)];

const segment = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...NAMES) }, { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) });
const separator = fc.constantFrom('/', '/', '/', '//', '///');

function pathFrom(prefixes: readonly string[]) {
  return fc.tuple(fc.constantFrom(...prefixes), fc.array(fc.tuple(segment, separator), { maxLength: 7 }), fc.boolean())
    .map(([prefix, parts, trailing]) => {
      const body = parts.map(([name, sep]) => `${name}${sep}`).join('');
      return `${prefix}${trailing ? body : body.replace(/\/+$/, '')}`;
    });
}

describe('host paths on a real tree with symlinks', () => {
  let root = '';
  let allowedReal = '';
  let policy: HostPathPolicy;

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-validation-'));
    const allowed = join(root, 'allowed');
    const outside = join(root, 'outside');
    mkdirSync(join(allowed, 'sub', 'deep'), { recursive: true });
    mkdirSync(join(outside, 'secret'), { recursive: true });
    mkdirSync(join(root, 'allowedness'));
    writeFileSync(join(allowed, 'file.txt'), 'x');
    symlinkSync(outside, join(allowed, 'link-out'));
    symlinkSync('../outside', join(allowed, 'link-rel-out'));
    symlinkSync('/etc', join(allowed, 'link-etc'));
    symlinkSync('/', join(allowed, 'link-root'));
    symlinkSync(join(allowed, 'sub'), join(allowed, 'link-in'));
    symlinkSync('..', join(allowed, 'sub', 'link-up'));
    symlinkSync('../..', join(allowed, 'sub', 'link-up2'));
    symlinkSync(join(outside, 'missing'), join(allowed, 'dangling-out'));
    symlinkSync(join(allowed, 'missing'), join(allowed, 'dangling-in'));
    symlinkSync(join(allowed, 'loop'), join(allowed, 'loop'));
    symlinkSync(join(allowed, 'chain2'), join(allowed, 'chain1'));
    symlinkSync(outside, join(allowed, 'chain2'));
    symlinkSync(join(root, 'allowedness'), join(allowed, 'link-prefix'));
    symlinkSync(outside, join(allowed, 'unicodé-out'));
    symlinkSync(allowed, join(outside, 'link-back'));
    symlinkSync(allowed, join(root, 'alias'));
    allowedReal = realpathSync(allowed);
    // The entry as configured, not pre-resolved: the validator resolves it itself.
    policy = { allowedVolumes: [`${allowed}/`], allowAllVolumes: false, protectedPaths: [] };
  });

  after(() => rmSync(root, { recursive: true, force: true }));

  it('never accepts a host path whose realpath is outside the allowlist', async () => {
    let accepted = 0;
    let refusedCount = 0;
    const prefixes = () => [`${root}/`, `${root}/allowed/`, `${root}//allowed//`, `${root}/outside/`, `${root}/allowed/sub/`, '/', '', './', '/etc/'];
    await fc.assert(
      fc.asyncProperty(fc.constant(null).chain(() => pathFrom(prefixes())), async (raw) => {
        let hostPath: string;
        try {
          const [mount] = await validateVolumes([`${raw}:/mnt`], policy);
          hostPath = mount!.hostPath;
        } catch (error) {
          onlyBerthErrors(error);
          refusedCount++;
          return;
        }
        accepted++;
        assert.ok(within(hostPath, allowedReal), `${raw} accepted as ${hostPath}, outside ${allowedReal}`);
        if (existsSync(raw)) assert.ok(within(realpathSync(raw), allowedReal), `${raw} really resolves to ${realpathSync(raw)}`);
        if (existsSync(hostPath)) {
          assert.equal(realpathSync(hostPath), hostPath, 'the mounted path has no symlink left');
        } else {
          let ancestor = hostPath;
          let missing = hostPath;
          while (!existsSync(ancestor)) {
            missing = ancestor;
            ancestor = posix.dirname(ancestor);
          }
          assert.ok(within(realpathSync(ancestor), allowedReal), `existing ancestor ${ancestor} of ${hostPath} resolves outside`);
          assert.throws(() => lstatSync(missing), 'the first missing name is not a dangling symlink');
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(accepted > 50 && refusedCount > 50, `both sides exercised (accepted ${accepted}, refused ${refusedCount})`);
  });

  it('refuses every symlink that leads out, however it is spelled', async () => {
    for (const name of ['link-out', 'link-rel-out', 'link-etc', 'link-root', 'sub/link-up2', 'dangling-out', 'chain1', 'link-prefix', 'unicodé-out', 'loop', 'dangling-in']) {
      for (const spelled of [`${root}/allowed/${name}`, `${root}//allowed/${name}/`, `${root}/allowed/${name}/x`, `${root}/alias/${name}`]) {
        await assert.rejects(validateVolumes([`${spelled}:/mnt`], policy), (error: unknown) => error instanceof BerthError, spelled);
      }
    }
  });

  it('accepts symlinks that stay inside, mounting their target', async () => {
    const cases: [string, string][] = [
      [`${root}/allowed/link-in`, `${allowedReal}/sub`],
      [`${root}/allowed/sub/link-up`, allowedReal],
      [`${root}/outside/link-back/sub`, `${allowedReal}/sub`],
      [`${root}/alias/new-dir`, `${allowedReal}/new-dir`],
    ];
    for (const [spelled, expected] of cases) {
      const [mount] = await validateVolumes([`${spelled}:/mnt`], policy);
      assert.equal(mount!.hostPath, expected);
    }
  });
});

const CONTAINER_NAMES = ['etc', 'proc', 'sys', 'dev', 'opt', 'claude', 'var', 'lib', 'berth', 'run', 'secrets', 'home', 'root', 'agent', 'bob',
  '.claude', '.claude.json', '.ssh', '.aws', '.config', 'gcloud', '.kube', '.docker', '.gnupg', 'workspace', 'x', '..', '.', '', 'ü', 'etcx'];
const containerSegment = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...CONTAINER_NAMES) }, { weight: 1, arbitrary: fc.string({ maxLength: 5 }) });
const containerPath = fc.tuple(fc.constantFrom('/', '/', '//', ''), fc.array(fc.tuple(containerSegment, separator), { maxLength: 6 }))
  .map(([lead, parts]) => `${lead}${parts.map(([name, sep]) => `${name}${sep}`).join('')}`);

// Workdirs refuse `//`, so half the generated workdirs use single slashes only, to exercise acceptance too.
const workdirLike = fc.array(fc.constantFrom(...CONTAINER_NAMES.filter((name) => name !== '')), { minLength: 1, maxLength: 5 })
  .map((names) => `/${names.join('/')}`);

describe('container paths and workdirs', () => {
  it('never accepts a blocked container path or an ancestor of Berth\'s mount points', () => {
    let accepted = 0;
    fc.assert(
      fc.property(containerPath, (raw) => {
        let target: string;
        try {
          const spec = parseVolumeSpec(`/data:${raw}`, 'v');
          checkContainerPath(spec);
          target = spec.containerPath;
        } catch (error) {
          onlyBerthErrors(error);
          return;
        }
        accepted++;
        const resolved = posix.resolve('/', raw);
        assert.equal(target, resolved);
        assert.ok(!isBlocked(resolved), `${raw} accepted as ${resolved}`);
        assert.ok(!BERTH_MOUNTS.some((mount) => mount.startsWith(`${resolved}/`)), `${raw} would nest a Berth mount`);
      }),
      { numRuns: 1000 },
    );
    assert.ok(accepted > 50, `accepted ${accepted}`);
  });

  it('never accepts a workdir under a blocked path, with unsafe characters or with traversal', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(containerPath, workdirLike), (raw) => {
        let workdir: string;
        try {
          workdir = validateWorkdir(raw);
        } catch (error) {
          onlyBerthErrors(error);
          return;
        }
        accepted++;
        assert.ok(/^\/[A-Za-z0-9._+@/-]*$/.test(raw), `${raw} has unsafe characters`);
        assert.ok(!raw.split('/').some((name) => name === '.' || name === '..'), `${raw} has traversal`);
        assert.equal(workdir, posix.resolve('/', raw));
        assert.ok(!isBlocked(workdir), `${raw} accepted as ${workdir}`);
      }),
      { numRuns: 1000 },
    );
    assert.ok(accepted > 100, `accepted ${accepted}`);
  });

  it('answers any string with a value or a 400, never another error', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 80 }), (a, b) => {
        for (const attempt of [() => checkContainerPath(parseVolumeSpec(`${a}:${b}`, 'v')), () => validateWorkdir(a), () => parseVolumeSpec(a, 'v')]) {
          try {
            attempt();
          } catch (error) {
            onlyBerthErrors(error);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
