import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kernelLoggedOomKill } from '../../src/runtime/kernel-oom-log.js';

const killed = 'a'.repeat(64);
const other = 'b'.repeat(64);
// As /dev/kmsg prints it on a cgroup v1 host (Debian 12, runc).
const LOG = [
  '6,1200,15804772650,-;[  pid  ]   uid  tgid total_vm      rss name',
  `6,1201,15804772654,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-${killed},mems_allowed=0,oom_memcg=/libpod_parent/libpod-${killed},task_memcg=/libpod_parent/libpod-${killed},task=sh,pid=23641,uid=1000`,
  '3,1202,15804772667,-;Memory cgroup out of memory: Killed process 23641 (sh) total-vm:59948kB',
  `6,1203,15804779999,-;some driver mentions libpod-${other} without an OOM kill`,
].join('\n');

describe('OOM kills read from the kernel log', () => {
  it('finds the kill of a container by its memory cgroup, and no kill for another', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kmsg-'));
    try {
      await writeFile(join(dir, 'kmsg'), LOG);
      assert.equal(kernelLoggedOomKill(killed, join(dir, 'kmsg')), true);
      assert.equal(kernelLoggedOomKill(other, join(dir, 'kmsg')), false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('cannot tell without a readable log, or for something that is not a container id', () => {
    assert.equal(kernelLoggedOomKill(killed, '/nonexistent/kmsg'), undefined);
    assert.equal(kernelLoggedOomKill('../../etc', '/dev/null'), undefined);
  });
});
