// deploy/berth.service (issue 27): systemd accepts every line of it, it runs the file the build makes and the
// image runs, and it keeps what Berth needs (docs/deploy.md). systemd is not PID 1 where the tests run, so
// the unit is verified, not started.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
const UNIT = join(REPO, 'deploy', 'berth.service');
const INSTALL_DIR = '/opt/berth';

/** The unit's settings by section, each key with every value it is given (in order), comments dropped. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const at = line.indexOf('=');
    assert.ok(current && at > 0, `a setting inside a section: ${line}`);
    const key = line.slice(0, at).trim();
    current.set(key, [...(current.get(key) ?? []), line.slice(at + 1).trim()]);
  }
  return sections;
}

async function service(): Promise<Map<string, string[]>> {
  const unit = parseUnit(await readFile(UNIT, 'utf8'));
  const section = unit.get('Service');
  assert.ok(section, 'a [Service] section');
  return section;
}

function one(section: Map<string, string[]>, key: string): string {
  const values = section.get(key);
  assert.equal(values?.length, 1, `${key} is set once`);
  return values![0]!;
}

test('systemd-analyze verify accepts every line of the unit', { skip: !existsSync('/usr/bin/systemd-analyze') && 'systemd-analyze is not installed' }, async () => {
  const { stderr } = await exec('systemd-analyze', ['verify', UNIT]);
  // It exits 0 on a misspelt option or value (it ignores them with a warning): the warnings count too.
  assert.equal(stderr.trim(), '');
});

test('ExecStart runs the compiled server where the build puts it and the image runs it', async () => {
  const [node, script, ...rest] = one(await service(), 'ExecStart').split(/\s+/);
  assert.deepEqual(rest, []);
  assert.equal(node, '/usr/bin/node', 'the Node of Debian-like hosts');
  assert.ok(script!.startsWith(`${INSTALL_DIR}/`), `${script} is under ${INSTALL_DIR}`);
  const inLayout = script!.slice(INSTALL_DIR.length + 1);
  // The build: tsconfig.build.json compiles src/ into dist/, so dist/main.js is src/main.ts compiled.
  const build = ts.readConfigFile(join(REPO, 'tsconfig.build.json'), ts.sys.readFile).config as { compilerOptions: { rootDir: string; outDir: string } };
  const source = join(build.compilerOptions.rootDir, inLayout.replace(new RegExp(`^${build.compilerOptions.outDir}/`), '')).replace(/\.js$/, '.ts');
  assert.ok(inLayout.startsWith(`${build.compilerOptions.outDir}/`) && existsSync(join(REPO, source)), `${inLayout} is the compiled ${source}`);
  // The image: the same file at the same place, its entry point.
  const imageScript = await readFile(join(REPO, 'scripts', 'build-berth-image.sh'), 'utf8');
  assert.match(imageScript, new RegExp(`^main=${inLayout.replace(/[.]/g, '\\.')}$`, 'm'));
  assert.match(imageScript, /ENTRYPOINT \["\/usr\/local\/bin\/node", "\/opt\/berth\/\$main"\]/);
});

test('the unit gives Berth its Podman socket, its directories and its settings file', async () => {
  const section = await service();
  const environment = new Map((section.get('Environment') ?? []).map((assignment) => assignment.split('=', 2) as [string, string]));
  assert.equal(environment.get('SERVICE_PODMAN_SOCKET'), '/run/podman/podman.sock');
  const stateDir = `/var/lib/${one(section, 'StateDirectory')}`;
  for (const variable of ['SERVICE_DATA_DIR', 'SERVICE_AGENT_SESSIONS_DIR']) {
    assert.ok(environment.get(variable)?.startsWith(`${stateDir}/`), `${variable} is in the state directory ${stateDir}`);
  }
  assert.equal(one(section, 'EnvironmentFile'), '/etc/berth/berth.env');
  const unit = parseUnit(await readFile(UNIT, 'utf8')).get('Unit')!;
  assert.ok(unit.get('After')?.some((value) => value.split(/\s+/).includes('podman.socket')));
});

test('a stop is SIGTERM to Berth alone, with time for a drain', async () => {
  const section = await service();
  // mixed: the helpers Berth unmounts with stay alive until it has exited.
  assert.equal(one(section, 'KillMode'), 'mixed');
  assert.equal(one(section, 'KillSignal'), 'SIGTERM');
  assert.match(one(section, 'TimeoutStopSec'), /^([6-9]|[1-9]\d+)min$/, 'longer than the default drain of 5 minutes');
});

test('no hardening option gives the service a mount namespace the host Podman would not see into', async () => {
  const section = await service();
  const namespacing = ['ProtectSystem', 'ProtectHome', 'PrivateTmp', 'PrivateDevices', 'PrivateMounts', 'ProtectKernelTunables', 'ProtectKernelModules',
    'ProtectKernelLogs', 'ProtectControlGroups', 'ProtectClock', 'ProtectProc', 'ReadWritePaths', 'ReadOnlyPaths', 'InaccessiblePaths', 'TemporaryFileSystem',
    'BindPaths', 'BindReadOnlyPaths', 'RootDirectory', 'RootImage', 'MountFlags', 'DynamicUser', 'User'];
  assert.deepEqual(namespacing.filter((key) => section.has(key)), []);
});
