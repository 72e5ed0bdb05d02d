// On cgroup v1 hosts Podman never reports an OOM kill (State.OOMKilled stays false) and the container's
// memory cgroup is gone by the time its exit is read. The kernel's log keeps the evidence: every OOM kill
// is logged with the memory cgroup it happened in, which for a Podman container ends in `libpod-<id>`.
// Reading it needs the right to read /dev/kmsg (root, or dmesg_restrict=0); without it Berth cannot tell.
import { closeSync, constants, openSync, readSync } from 'node:fs';

/** Whether the kernel logged an OOM kill in the container's memory cgroup; undefined when the log cannot be read. */
export function kernelLoggedOomKill(containerId: string, kmsgPath = '/dev/kmsg'): boolean | undefined {
  if (!/^[0-9a-f]{64}$/.test(containerId)) return undefined;
  let fd: number;
  try {
    fd = openSync(kmsgPath, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const needle = `task_memcg=`;
  const record = Buffer.alloc(8192);
  try {
    for (;;) {
      let length: number;
      try {
        // One read returns one record; the end of the buffer is EAGAIN.
        length = readSync(fd, record, 0, record.length, null);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // EPIPE: records were overwritten while reading; the next read goes on with the oldest left.
        if (code === 'EPIPE') continue;
        return code === 'EAGAIN' ? false : undefined;
      }
      if (length === 0) return false;
      // A record may be continued on further lines (a file given in its place holds many records).
      for (const line of record.toString('utf8', 0, length).split('\n')) {
        const at = line.indexOf(needle);
        if (at >= 0 && line.includes('oom-kill:') && line.slice(at + needle.length).split(',')[0]!.endsWith(`libpod-${containerId}`)) return true;
      }
    }
  } finally {
    closeSync(fd);
  }
}
