// Removes a test Berth's temporary directory even when that Berth was killed: its run disks (loop-mounted
// ext4 images, runtime/run-disk.ts) and volume staging mounts may still be mounted below it, and rm then
// fails with EBUSY and leaves the directory, its mounts and their loop devices behind.
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { mountPoints } from '../../src/runtime/run-disk.js';

const exec = promisify(execFile);

/** Unmounts (lazily, deepest first) every mount point at or below `dir`, then removes `dir`. */
export async function removeTestDir(dir: string): Promise<void> {
  const below = [...(await mountPoints())].filter((path) => path === dir || path.startsWith(`${dir}/`));
  for (const path of below.sort((a, b) => b.length - a.length)) {
    await exec('umount', ['-l', path]).catch(() => undefined);
  }
  await rm(dir, { recursive: true, force: true });
}
