// A workspace's tree bound at a run's workdir directory (on the run's disk), and found again after a restart.
// The bind itself is runtime/workspace-disks.ts's bindTree; this file answers "which workspace is bound at
// this directory?" from the kernel's own tables, so that a restarted Berth following a run or an agent again
// knows which workspace the engine is working in without having written it down anywhere: the mount's
// device is a loop device, and the loop device's backing file is the workspace's image `<id>.disk`.
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { DISK_IMAGE_SUFFIX } from './run-disk.js';
import { bindTree, unbindTree } from './workspace-disks.js';
import { uuidNamed } from '../uuid.js';

const WORKSPACE_IMAGE = uuidNamed(DISK_IMAGE_SUFFIX);

/** Puts workspaces at run workdirs and takes them away again (a fake in unit tests). */
export interface WorkdirBinder {
  /** Binds a workspace's tree (its disk mount's, never the view) onto `target`, nosuid,nodev. */
  bind(treeHostPath: string, target: string): Promise<void>;
  /** Takes the bind away; nothing to do when `target` is not a mount point. */
  unbind(target: string): Promise<void>;
  /** The id of the workspace whose tree is bound at `target`, if one is. */
  boundAt(target: string): Promise<string | undefined>;
}

export const loopWorkdirBinder: WorkdirBinder = {
  bind: bindTree,
  unbind: unbindTree,
  boundAt: boundWorkspaceAt,
};

/** One line of /proc/self/mountinfo: its device and mount point (octal escapes decoded). */
function mountOf(line: string): { device: string; mountPoint: string } | undefined {
  const fields = line.split(' ');
  if (fields.length < 5) return undefined;
  return { device: fields[2]!, mountPoint: fields[4]!.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))) };
}

export async function boundWorkspaceAt(target: string): Promise<string | undefined> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  // The last mount at a path is the one on top (what a lookup of the path reaches).
  const mount = table.split('\n').map(mountOf).filter((entry) => entry?.mountPoint === target).at(-1);
  if (!mount) return undefined;
  const backing = await readFile(`/sys/dev/block/${mount.device}/loop/backing_file`, 'utf8').catch(() => undefined);
  if (backing === undefined) return undefined;
  return WORKSPACE_IMAGE.exec(basename(backing.trim().replace(/ \(deleted\)$/, '')))?.[1];
}
