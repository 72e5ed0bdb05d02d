// Workspaces' saved copies in the directory every node mounts (SERVICE_SHARED_DIR, issue 26): one tar per
// workspace, `<dir>/workspaces/<id>.tar`, so that a node that does not have a workspace's current disk makes
// one from the copy before it runs or serves it (workspace-service.ts decides when).
//
// Why a directory of tar files and not PostgreSQL large objects: a workspace is up to SERVICE_WORKSPACE_MAX_BYTES
// (2 GiB by default) of files; through the database every save and restore would cross one connection of the
// shared pool and fill its WAL and backups with every run's tree, where a shared file system takes a sequential
// write at disk speed and is backed up with the other files. Why tar: one file per workspace is one rename
// away from being whole (a reader never sees half of one), and GNU tar keeps what a tree holds: links as links
// (never followed), owners and modes by number, sparse files as holes, times.
//
// What the directory holds is other callers' files, so: names are made only of the workspace id (a UUID the
// server made, checked again here), never of anything a caller sent; the directory is 0700 and each copy 0600,
// Berth's only; a copy is written under a temporary name, fsynced, renamed into place and the directory
// fsynced. A copy is read through a descriptor opened without following links and must be a regular file no
// larger than a full workspace's tar can be; it is unpacked by GNU tar onto the workspace's nosymfollow view
// (runtime/workspace-disks.ts), where the kernel follows no link in any path, so a link in the copy is made as
// a link and nothing is ever written through one; setuid/setgid/sticky bits and device nodes are then
// removed, as a tree never has them. The new disk has the workspace's size and inodes: a copy cannot unpack
// to more than the workspace's quota.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, chmod, lstat, mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errors } from '../../errors.js';
import { UUID_PATTERN } from '../../uuid.js';

/** The largest tar a workspace can make: its bytes, plus header and padding per inode, plus tar's end blocks. */
export function copyLimitBytes(maxBytes: number, inodes: number): number {
  return maxBytes + inodes * 3 * 512 + 1024 * 1024;
}

/** What a copy is made from and unpacked into: a mounted workspace's nosymfollow view (`<view>/tree`). */
export interface WorkspaceCopies {
  save(id: string, view: string): Promise<void>;
  restore(id: string, view: string): Promise<void>;
  remove(id: string): Promise<void>;
}

export class SharedWorkspaceCopies implements WorkspaceCopies {
  private constructor(
    private readonly dir: string,
    private readonly limitBytes: number,
  ) {}

  /**
   * Checks SERVICE_SHARED_DIR (exists, is a directory, Berth can write it) and makes its `workspaces`
   * directory; every failure names the variable and the path.
   */
  static async open(sharedDir: string, limitBytes: number): Promise<SharedWorkspaceCopies> {
    const info = await stat(sharedDir).catch((error: NodeJS.ErrnoException) => {
      throw new Error(`SERVICE_SHARED_DIR: ${sharedDir} cannot be used: ${error.code === 'ENOENT' ? 'it does not exist' : error.message}`);
    });
    if (!info.isDirectory()) throw new Error(`SERVICE_SHARED_DIR: ${sharedDir} is not a directory`);
    await access(sharedDir, constants.W_OK | constants.X_OK).catch(() => {
      throw new Error(`SERVICE_SHARED_DIR: ${sharedDir} is not writable by Berth`);
    });
    const dir = join(sharedDir, 'workspaces');
    await mkdir(dir, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw new Error(`SERVICE_SHARED_DIR: cannot make ${dir}: ${error.message}`);
    });
    const made = await lstat(dir);
    if (!made.isDirectory()) throw new Error(`SERVICE_SHARED_DIR: ${dir} is not a directory`);
    await chmod(dir, 0o700);
    // A probe that the file system takes a write, a rename and a fsync (a read-only NFS export fails here).
    const probe = join(dir, `.probe-${randomBytes(6).toString('hex')}`);
    try {
      await writeFile(probe, 'berth', { mode: 0o600, flag: 'wx' });
      const handle = await open(probe, 'r+');
      await handle.sync().finally(() => handle.close());
    } catch (error) {
      throw new Error(`SERVICE_SHARED_DIR: ${dir} is not writable by Berth: ${(error as Error).message}`);
    } finally {
      await rm(probe, { force: true });
    }
    return new SharedWorkspaceCopies(dir, limitBytes);
  }

  /** Where the workspace's copy is: from its server-made id only. */
  pathOf(id: string): string {
    if (!UUID_PATTERN.test(id)) throw new Error(`workspace id "${id}" is not a UUID`);
    return join(this.dir, `${id.toLowerCase()}.tar`);
  }

  async save(id: string, view: string): Promise<void> {
    const target = this.pathOf(id);
    const temporary = join(this.dir, `.${id.toLowerCase()}.${randomBytes(6).toString('hex')}.tmp`);
    // Made 0600 by Berth before tar writes into it: never readable by anyone else, not even for a moment.
    await writeFile(temporary, '', { mode: 0o600, flag: 'wx' });
    try {
      await runTar(
        ['--create', `--file=${temporary}`, '--format=posix', '--numeric-owner', '--sparse', '--one-file-system', '--directory', join(view, 'tree'), '.'],
        `saving workspace ${id} to SERVICE_SHARED_DIR`,
      );
      const handle = await open(temporary, 'r+');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, target);
      await syncDirectory(this.dir);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
  }

  async restore(id: string, view: string): Promise<void> {
    const path = this.pathOf(id);
    const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((error: NodeJS.ErrnoException) => {
      throw errors.runtimeUnavailable(`workspace ${id} has no saved copy in SERVICE_SHARED_DIR (${error.code ?? error.message})`);
    });
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw errors.internal(`the saved copy of workspace ${id} is not a regular file`);
      if (info.size > this.limitBytes) throw errors.internal(`the saved copy of workspace ${id} is ${info.size} bytes, more than a workspace can hold`);
      const tree = join(view, 'tree');
      await runTar(
        ['--extract', '--file=-', '--numeric-owner', '--same-owner', '--preserve-permissions', '--no-overwrite-dir', '--directory', tree],
        `restoring workspace ${id} from SERVICE_SHARED_DIR`,
        handle.fd,
      );
      // A tree never holds these (uploads, archives and forks drop them): neither does a restored one.
      await runCommand('find', [tree, '-xdev', '(', '-type', 'b', '-o', '-type', 'c', ')', '-delete']);
      await runCommand('find', [tree, '-xdev', '!', '-type', 'l', '-perm', '/7000', '-exec', 'chmod', 'ug-s,o-t', '{}', '+']);
    } finally {
      await handle.close();
    }
  }

  async remove(id: string): Promise<void> {
    await rm(this.pathOf(id), { force: true });
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** GNU tar with stdin from `input` (a descriptor) or nothing; its last stderr line in the error. */
async function runTar(args: readonly string[], what: string, input?: number): Promise<void> {
  await runCommand('tar', args, input).catch((error: Error) => {
    throw new Error(`${what} failed: ${error.message}`);
  });
}

function runCommand(command: string, args: readonly string[], input?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: [input ?? 'ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4096);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} exited with ${signal ?? code}: ${stderr.trim().split('\n').at(-1) ?? ''}`));
    });
  });
}
