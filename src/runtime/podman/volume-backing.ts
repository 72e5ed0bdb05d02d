// A named volume whose data lives on a file system Berth chose (a stack's disk, runtime/run-disk.ts), not in
// Podman's storage. Podman's own way, a local volume with `type=none,o=bind,device=…`, leaves its bind mount
// behind on Podman 4.3 when the container ends and then fails to remove the volume ("device or resource
// busy"). So the volume is made as a plain local volume and Berth binds the directory onto the volume's own
// `_data` itself: for Podman it is an ordinary volume (it copies the image's content up into it when empty
// and gives it to the container's user), while every byte lands on the backing file system.
import { isMountPoint } from '../run-disk.js';
import { runHostCommand } from '../host-commands.js';

const run = runHostCommand;

/** Binds `backingDir` onto a volume's data directory (its Mountpoint as Podman reports it). */
export async function bindVolumeData(backingDir: string, dataDir: string): Promise<void> {
  await run('mount', ['--bind', '-o', 'nosuid,nodev', backingDir, dataDir]);
}

/** Undoes bindVolumeData, if the data directory is bound (lazily when a reader still holds it). */
export async function unbindVolumeData(dataDir: string): Promise<void> {
  if (!(await isMountPoint(dataDir))) return;
  try {
    await run('umount', [dataDir]);
  } catch {
    await run('umount', ['-l', dataDir]);
  }
}
