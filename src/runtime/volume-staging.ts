// Mounts exactly what was checked. A host path handed to Podman as a string is resolved again when the
// container starts, so a caller who can write in an allowed tree could swap a checked directory for a
// symlink to `/` in between. Instead, Berth opens the path component by component without following any
// link, keeps the descriptor, and bind-mounts *that object* (through /proc/self/fd) onto a staging path
// only Berth can write; Podman gets the staging path, which no caller can change, and the staging mount is
// released once the container has started (the container keeps its own copy of the mount).
//
// The staging bind is not recursive, so mounts below the checked directory are not carried along: `ro`,
// `nosuid` and `nodev` then hold for everything the container sees there. (Podman's own non-recursive
// bind is refused inside a user namespace when the source has submounts; a staging mount has none.)
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, open, readdir, rmdir, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/** Why a host path cannot be staged; `index` is the volume's position in the request. */
export class HostPathError extends Error {
  constructor(
    readonly index: number,
    readonly hostPath: string,
    readonly reason: 'missing' | 'changed' | 'unsupported-type',
    detail: string,
  ) {
    super(`host path "${hostPath}" ${detail}`);
    this.name = 'HostPathError';
  }
}

export interface StagedVolumes {
  /** The paths to give the container runtime, in the order of the host paths given to stage(). */
  readonly hostPaths: readonly string[];
  /** The same staging mounts as Berth's own process sees them (to read them, e.g. a build context). */
  readonly localPaths: readonly string[];
  /** Unmounts and removes the staging paths; safe to call more than once. */
  release(): Promise<void>;
}

export interface VolumeStagingOptions {
  /** Berth's own directory for staging mounts (mode 0700). */
  readonly dir: string;
  /** The same directory as the container runtime sees the host (differs when Berth runs in a container). */
  readonly hostDir: string;
}

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

export class VolumeStaging {
  constructor(private readonly options: VolumeStagingOptions) {}

  /** Creates the staging directory and releases what a killed process left there (unmount, then rmdir). */
  async init(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.options.dir)) await releasePath(join(this.options.dir, name));
  }

  /**
   * Pins each host path (already resolved and allowed by validation) and mounts it on a staging path.
   * A path whose components changed since validation (a component became a link, or the object is not a
   * directory or regular file) is refused; nothing stays mounted when any path fails.
   */
  async stage(id: string, hostPaths: readonly string[], readOnly: readonly boolean[]): Promise<StagedVolumes> {
    const staged: string[] = [];
    const release = async () => {
      for (const path of staged.splice(0)) await releasePath(path);
    };
    try {
      const result: string[] = [];
      const local: string[] = [];
      for (const [index, hostPath] of hostPaths.entries()) {
        const name = `${id}-${index}`;
        const target = join(this.options.dir, name);
        const handle = await pinPath(index, hostPath);
        try {
          const isDirectory = (await handle.stat()).isDirectory();
          if (isDirectory) await mkdir(target, { mode: 0o700 });
          else await writeFile(target, '', { mode: 0o600, flag: 'wx' });
          staged.push(target);
          await bindFromDescriptor(handle, target, readOnly[index] === true);
        } finally {
          await handle.close();
        }
        result.push(join(this.options.hostDir, name));
        local.push(target);
      }
      return { hostPaths: result, localPaths: local, release };
    } catch (error) {
      await release();
      throw error;
    }
  }
}

/**
 * Reads a regular file the way volumes are mounted: reached one component at a time without following
 * any link, so what is read is the object validation resolved. Undefined when it does not exist;
 * HostPathError when it changed, is not a regular file, or is larger than `maxBytes`.
 */
export async function readPinnedFile(hostPath: string, maxBytes: number): Promise<Buffer | undefined> {
  let handle: FileHandle;
  try {
    handle = await pinPath(0, hostPath);
  } catch (error) {
    if (error instanceof HostPathError && error.reason === 'missing') return undefined;
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new HostPathError(0, hostPath, 'unsupported-type', 'is not a regular file');
    if (info.size > maxBytes) throw new HostPathError(0, hostPath, 'unsupported-type', `is larger than ${maxBytes} bytes`);
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(info.size + 1), 0, info.size + 1, 0);
    if (bytesRead > info.size) throw new HostPathError(0, hostPath, 'changed', 'grew while it was being read');
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Opens an absolute path one component at a time, never following a link; only directories and regular files. */
async function pinPath(index: number, hostPath: string): Promise<FileHandle> {
  const parts = hostPath.split('/').filter((part) => part !== '');
  if (!hostPath.startsWith('/') || parts.some((part) => part === '.' || part === '..')) {
    throw new HostPathError(index, hostPath, 'changed', 'is not an absolute, normalised path');
  }
  let current = await open('/', O_RDONLY | O_DIRECTORY);
  for (const [position, part] of parts.entries()) {
    const last = position === parts.length - 1;
    // /proc/self/fd/N is the directory already opened; `part` is looked up in it, and with O_NOFOLLOW a
    // link there fails (ELOOP) instead of being followed. O_NONBLOCK: opening a FIFO must not hang.
    const flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (last ? 0 : O_DIRECTORY);
    let next: FileHandle;
    try {
      next = await open(`/proc/self/fd/${current.fd}/${part}`, flags);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw new HostPathError(index, hostPath, 'missing', 'does not exist');
      if (code === 'ELOOP' || code === 'ENOTDIR') {
        throw new HostPathError(index, hostPath, 'changed', 'changed while it was being checked (a component is now a symbolic link or not a directory)');
      }
      throw error;
    } finally {
      await current.close();
    }
    current = next;
  }
  const info = await current.stat();
  if (!info.isDirectory() && !info.isFile()) {
    await current.close();
    throw new HostPathError(index, hostPath, 'unsupported-type', 'is neither a directory nor a regular file');
  }
  return current;
}

/** `mount --bind` of the pinned object (passed as the child's fd 3), then the flags on the staging mount. */
async function bindFromDescriptor(handle: FileHandle, target: string, readOnly: boolean): Promise<void> {
  await run('mount', ['--no-canonicalize', '--bind', '/proc/self/fd/3', target], handle.fd);
  await run('mount', ['--no-canonicalize', '-o', `remount,bind,nosuid,nodev${readOnly ? ',ro' : ''}`, target]);
}

/** Unmounts a staging path and removes it; never recursively, so a path still mounted is left alone. */
async function releasePath(path: string): Promise<void> {
  await run('umount', ['--no-canonicalize', '--lazy', path]).catch(() => undefined);
  await rmdir(path).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOTDIR') await unlink(path).catch(() => undefined);
  });
}

function run(command: string, args: readonly string[], passFd?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe', ...(passFd === undefined ? [] : [passFd])] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')}: exit ${code}: ${stderr.trim()}`))));
  });
}
