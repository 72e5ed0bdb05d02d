// A rootful Podman cannot give a build's steps a user namespace through its API here (Podman 4.3,
// buildah 1.28): with `idmappingoptions` the steps do run as a mapped uid, but the working container's root
// directory stays the host's root's, and the committed layers keep the HOST uids (700000000…), so the
// image is broken for every mapped run. So a rootful Berth builds with rootless Podman as an unprivileged
// system user (SERVICE_COMPOSE_BUILD_USER): root in a RUN step is that user, the rest of the step's ids
// its subordinate range. Each build gets a sandbox of its own (context, storage, runtime directory) that is
// removed afterwards together with every process of the build's user namespace: nothing outlives a build.
// The images the build reads are copied in from the rootful store (oci-archive), the result copied back.
// The sandbox is a file system of its own (runtime/run-disk.ts, SERVICE_COMPOSE_BUILD_DISK): the copies of
// the images read, vfs storage (every layer a full copy), every step's writes and the saved result share
// it, so a build that writes more fails with ENOSPC instead of filling the host's disk.
import { execFile, spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, readlink, rm, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { extract as extractTar } from 'tar';
import { BuildTimeoutError, sandboxPrefix, type BuildOptions } from '../ports/builds.js';
import { STACK_INSTANCE_LABEL } from '../ports/labels.js';
import { RuntimeError } from '../ports/runtime-error.js';
import { DISK_IMAGE_SUFFIX, LoopDisks, isMountPoint } from '../run-disk.js';
import { buildStepCapabilityOptions } from '../container-policy.js';
import type { PodmanClient } from './client.js';

const exec = promisify(execFile);
/** Subordinate ids of the build user, when Berth creates them: this many from the base it is given. */
const SUBORDINATE_IDS = 65_536;
const CPU_PERIOD_US = 100_000;

export interface RootlessBuildRequest {
  readonly options: BuildOptions;
  /** The packed context (runtime/podman/image-build.ts). */
  readonly tarPath: string;
  /** The local images the Containerfile reads (normalised). */
  readonly images: readonly string[];
  /** First subordinate id given to the build user when Berth creates its range. */
  readonly subordinateBase: number;
  /** The end of the build's output as an error carries it. */
  readonly tail: (output: string) => string;
}

let userReady: Promise<{ uid: number; gid: number }> | undefined;
/** How to end each build in progress (at Berth's stop), with the instance that asked for it. */
const running = new Map<() => Promise<void>, string>();

/**
 * Ends every build of the instance in progress (Berth's stop: it cancels the runs, whose builds would
 * otherwise hold their drain for up to build_timeout): processes killed, disk unmounted, sandbox and
 * cgroups removed. A build queued behind them still starts; the run it belongs to is cancelled anyway,
 * and what a build outliving the process leaves is removed at the next start (removeLeftoverBuilds).
 */
export async function stopBuilds(instanceName: string): Promise<void> {
  const stopping = [...running].filter(([, instance]) => instance === instanceName).map(([stop]) => stop);
  await Promise.all(stopping.map((stop) => stop().catch(() => undefined)));
}

export async function buildRootless(client: PodmanClient, request: RootlessBuildRequest): Promise<void> {
  const { options } = request;
  userReady ??= ensureBuildUser(options.buildUser, request.subordinateBase);
  const ids = await userReady.catch((error: unknown) => {
    userReady = undefined;
    throw error;
  });
  const sandbox = await makeSandbox(options);
  const paths = { context: join(sandbox, 'context'), storage: join(sandbox, 'storage'), run: join(sandbox, 'run'), home: join(sandbox, 'home') };
  // Rootless Podman cannot set limits on cgroups v1, so the whole build (Podman, runc, every step) runs in
  // cgroups Berth makes for it: memory, pids and CPU bounded, and every process of it found for the kill.
  let cgroups: string[] = [];
  let timedOut = false;
  let stopping = false;
  let ended = false;
  // Berth's stop ends the build as its time limit does (below), without waiting for it to notice: its
  // processes killed (again while they last, at most 5 s), its disk, sandbox and cgroups removed.
  const stop = async () => {
    stopping = true;
    for (let round = 0; round < 25 && !ended; round += 1) {
      await killAll(paths.run, cgroups);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await killAll(paths.run, cgroups);
    await removeSandbox(sandbox);
    await removeCgroups(cgroups);
  };
  running.set(stop, options.labels[STACK_INSTANCE_LABEL] ?? '');
  // At the limit every process of the build's namespace is killed, again until the build has ended (a
  // step may be starting while the first kill runs), and no further step begins.
  const killer = setTimeout(() => {
    timedOut = true;
    void (async () => {
      while (!ended) {
        await killAll(paths.run, cgroups);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
  }, options.timeoutMs);
  const step = async (args: readonly string[], containersConf: string | undefined) => {
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    if (stopping) throw new RuntimeError('the build was stopped: Berth is stopping', false);
    return runPodman(options.buildUser, paths, cgroups, containersConf, args);
  };
  try {
    cgroups = await createCgroups(basename(sandbox), options);
    for (const dir of Object.values(paths)) await mkdir(dir, { mode: 0o700 });
    await extractTar({ file: request.tarPath, cwd: paths.context, preserveOwner: false });
    // Berth's containers.conf (runc, explicit ulimits) may lie where the build user cannot read it: a copy.
    const containersConf = process.env.CONTAINERS_CONF ? join(paths.home, 'containers.conf') : undefined;
    if (containersConf) await copyFile(process.env.CONTAINERS_CONF!, containersConf);
    await exec('chown', ['-R', '-h', `${ids.uid}:${ids.gid}`, sandbox]);
    await chmod(sandbox, 0o711);
    const podman = (args: readonly string[]) => step(args, containersConf);
    for (const [index, image] of request.images.entries()) {
      const archive = join(sandbox, `base-${index}.tar`);
      await exportImage(client, image, archive).catch((error: unknown) => {
        throw new RuntimeError(`the image ${image} could not be copied into the build${diskFull((error as Error).message, options)}: ${(error as Error).message}`, false);
      });
      await exec('chown', [`${ids.uid}:${ids.gid}`, archive]);
      const loaded = await podman(['load', '--quiet', '--input', archive]);
      if (loaded.code !== 0) throw new RuntimeError(`the image ${image} could not be loaded into the build${diskFull(loaded.output, options)}: ${request.tail(loaded.output)}`, false);
      await rm(archive, { force: true });
    }
    const built = await podman(buildArguments(options, paths.context));
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    if (built.code !== 0) throw new RuntimeError(`the build failed (exit ${built.code})${diskFull(built.output, options)} (last output: ${request.tail(built.output)})`, false);
    const result = join(sandbox, 'result.tar');
    const saved = await podman(['save', '--quiet', '--format', 'oci-archive', '--output', result, options.tag]);
    if (saved.code !== 0) throw new RuntimeError(`the built image could not be saved${diskFull(saved.output, options)}: ${request.tail(saved.output)}`, false);
    await client.call('/images/load', { method: 'POST', body: createReadStream(result), contentType: 'application/x-tar' });
  } catch (error) {
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    throw error;
  } finally {
    running.delete(stop);
    ended = true;
    clearTimeout(killer);
    await killAll(paths.run, cgroups);
    await removeSandbox(sandbox);
    await removeCgroups(cgroups);
  }
}

/** The build's sandbox: a directory only Berth can reach, mounted on a disk of its own when it has a size. */
async function makeSandbox(options: BuildOptions): Promise<string> {
  if (options.diskBytes === undefined) return mkdtemp(join(tmpdir(), sandboxPrefix(options)));
  const sandbox = join(tmpdir(), `${sandboxPrefix(options)}${randomBytes(6).toString('hex')}`);
  // A failed creation leaves nothing (LoopDisks.create removes its image); the empty mount point goes too.
  await new LoopDisks().create(sandbox, options.diskBytes, { bare: true }).catch(async (error: unknown) => {
    await rmdir(sandbox).catch(() => undefined);
    throw new RuntimeError(`the build's disk could not be made: ${(error as Error).message}`, false);
  });
  return sandbox;
}

/** Removes a sandbox: its disk unmounted (after every process of the build was killed), its image and directory. */
async function removeSandbox(sandbox: string): Promise<void> {
  if (await isMountPoint(sandbox)) await new LoopDisks().release(sandbox);
  await rm(sandbox, { recursive: true, force: true });
  await rm(`${sandbox}${DISK_IMAGE_SUFFIX}`, { force: true });
}

/** What a build's error says when its output shows it ran out of its disk. */
function diskFull(output: string, options: BuildOptions): string {
  if (options.diskBytes === undefined || !/no space left on device|ENOSPC/i.test(output)) return '';
  return `: it ran out of its disk of ${Math.round(options.diskBytes / 1024 ** 2)} MiB (SERVICE_COMPOSE_BUILD_DISK: the images it reads, every step's writes and the built image share it)`;
}

/**
 * At start: the sandboxes of builds a killed process of this instance left (directories and disk images named
 * after the instance under the temporary directory): their processes killed, disks unmounted, all removed.
 */
export async function removeLeftoverBuilds(instanceName: string): Promise<string[]> {
  const prefix = sandboxPrefix({ labels: { [STACK_INSTANCE_LABEL]: instanceName } });
  const removed: string[] = [];
  for (const name of await readdir(tmpdir()).catch(() => [] as string[])) {
    // Exactly the names this module and image-build.ts make: never another instance whose name starts alike.
    if (!name.startsWith(prefix) || !/^(?:[0-9a-f]{12}|[A-Za-z0-9]{6}|context-[A-Za-z0-9]{6})(?:\.disk)?$/.test(name.slice(prefix.length))) continue;
    const sandbox = name.endsWith(DISK_IMAGE_SUFFIX) ? name.slice(0, -DISK_IMAGE_SUFFIX.length) : name;
    const path = join(tmpdir(), sandbox);
    if (removed.includes(path)) continue;
    const cgroups = await existingCgroups(sandbox);
    await killAll(join(path, 'run'), cgroups);
    await removeSandbox(path);
    await removeCgroups(cgroups);
    removed.push(path);
  }
  return removed;
}

function buildArguments(options: BuildOptions, context: string): string[] {
  return [
    'build', '--pull=never', '--network=none', '--layers=false', '--isolation=oci',
    // The container policy's row for build steps (runtime/container-policy.ts): Podman's default set, no more.
    ...buildStepCapabilityOptions(),
    '--file', join(context, options.dockerfile),
    '--tag', options.tag,
    ...Object.entries(options.args).flatMap(([name, value]) => ['--build-arg', `${name}=${value}`]),
    ...Object.entries(options.labels).flatMap(([name, value]) => ['--label', `${name}=${value}`]),
    ...(options.target !== undefined ? ['--target', options.target] : []),
    context,
  ];
}

/** Rootless Podman as the build user, confined to the sandbox's storage and runtime directory. */
function runPodman(
  user: string,
  paths: { storage: string; run: string; home: string },
  cgroups: readonly string[],
  containersConf: string | undefined,
  args: readonly string[],
): Promise<{ code: number; output: string }> {
  const environment = [
    `HOME=${paths.home}`,
    `XDG_RUNTIME_DIR=${paths.run}`,
    'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    ...(containersConf ? [`CONTAINERS_CONF=${containersConf}`] : []),
  ];
  const global = ['--root', paths.storage, '--runroot', paths.run, '--storage-driver', 'vfs', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file'];
  return new Promise((resolve, reject) => {
    // The shell enters the build's cgroups first, so that runuser and all it starts are in them from the start.
    const enter = 'for group in $BERTH_BUILD_CGROUPS; do echo $$ > "$group/cgroup.procs"; done; exec "$@"';
    const command = ['runuser', '-u', user, '--', 'env', '-i', ...environment, 'podman', ...global, ...args];
    const child = spawn('sh', ['-c', enter, 'sh', ...command], {
      env: { ...process.env, BERTH_BUILD_CGROUPS: cgroups.join(' ') },
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: paths.home,
    });
    // Only the end is ever shown; keep a bounded window of the output.
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-16_384);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

async function exportImage(client: PodmanClient, image: string, file: string): Promise<void> {
  const response = await client.request(`/images/${encodeURIComponent(image)}/get`, { query: { format: 'oci-archive' } });
  await pipeline(response.body, createWriteStream(file, { mode: 0o600 }));
}

/** cgroup v1 directories (memory, pids, cpu) under Berth's own, limited; none where the host has no such controller. */
async function createCgroups(name: string, limits: Pick<BuildOptions, 'memoryBytes' | 'cpus' | 'pidsLimit'>): Promise<string[]> {
  const own = await readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  const settings: Record<string, [string, string][]> = {
    memory: [['memory.limit_in_bytes', String(limits.memoryBytes)], ['memory.memsw.limit_in_bytes', String(limits.memoryBytes)]],
    pids: [['pids.max', String(limits.pidsLimit)]],
    cpu: [['cpu.cfs_period_us', String(CPU_PERIOD_US)], ['cpu.cfs_quota_us', String(Math.round(limits.cpus * CPU_PERIOD_US))]],
  };
  const made: string[] = [];
  try {
    await fillCgroups(own, name, settings, made);
  } catch (error) {
    await removeCgroups(made);
    throw error;
  }
  return made;
}

async function fillCgroups(own: string, name: string, settings: Record<string, [string, string][]>, made: string[]): Promise<void> {
  for (const [controller, files] of Object.entries(settings)) {
    const line = own.split('\n').find((entry) => entry.split(':')[1]?.split(',').includes(controller));
    if (line === undefined) continue;
    const dir = join('/sys/fs/cgroup', controller, line.split(':').slice(2).join(':'), name);
    try {
      await mkdir(dir);
    } catch {
      continue;
    }
    made.push(dir);
    for (const [file, value] of files) {
      // memsw exists only with swap accounting; the rest must take.
      await writeFile(join(dir, file), value).catch((error: unknown) => {
        if (!file.includes('memsw')) throw new RuntimeError(`cannot limit the build (${file}): ${(error as Error).message}`, false);
      });
    }
  }
}

/** The cgroups a build of this name was given (under Berth's own, as createCgroups makes them) that still exist. */
async function existingCgroups(name: string): Promise<string[]> {
  const own = await readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  const found: string[] = [];
  for (const controller of ['memory', 'pids', 'cpu']) {
    const line = own.split('\n').find((entry) => entry.split(':')[1]?.split(',').includes(controller));
    if (line === undefined) continue;
    const dir = join('/sys/fs/cgroup', controller, line.split(':').slice(2).join(':'), name);
    if (await readFile(join(dir, 'cgroup.procs'), 'utf8').then(() => true, () => false)) found.push(dir);
  }
  return found;
}

async function removeCgroups(cgroups: readonly string[]): Promise<void> {
  for (const dir of cgroups) {
    // A killed process leaves its cgroup a moment after the signal.
    for (let attempt = 0; attempt < 50; attempt += 1) {
      if (await rmdir(dir).then(() => true, () => false)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Every process of the build: those in its cgroups and those in its user namespace. */
async function killAll(runDir: string, cgroups: readonly string[]): Promise<void> {
  for (const dir of cgroups) {
    const pids = (await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  }
  await killNamespace(runDir);
}

/**
 * Kills every process in the build's user namespace (rootless Podman keeps it alive with a pause process
 * whose pid it writes under the runtime directory): the build's steps, its Podman, the pause process.
 */
async function killNamespace(runDir: string): Promise<void> {
  const pause = Number((await readFile(join(runDir, 'libpod', 'tmp', 'pause.pid'), 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pause) || pause <= 1) return;
  const namespace = await readlink(`/proc/${pause}/ns/user`).catch(() => undefined);
  if (namespace === undefined) return;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if ((await readlink(`/proc/${entry}/ns/user`).catch(() => undefined)) !== namespace) continue;
    try {
      process.kill(Number(entry), 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

/** The build user, created (a system user without a home or shell) with a subordinate id range when missing. */
async function ensureBuildUser(user: string, subordinateBase: number): Promise<{ uid: number; gid: number }> {
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) throw new RuntimeError(`"${user}" is not a valid name for the build user`, false);
  const idOf = async (flag: '-u' | '-g') => Number((await exec('id', [flag, user])).stdout.trim());
  try {
    await idOf('-u');
  } catch {
    await exec('useradd', ['--system', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', user]);
  }
  const uid = await idOf('-u');
  const gid = await idOf('-g');
  const has = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').some((line) => line.startsWith(`${user}:`) || line.startsWith(`${uid}:`));
  if (!(await has('/etc/subuid')) || !(await has('/etc/subgid'))) {
    const range = `${subordinateBase}-${subordinateBase + SUBORDINATE_IDS - 1}`;
    await exec('usermod', ['--add-subuids', range, '--add-subgids', range, user]);
  }
  return { uid, gid };
}
