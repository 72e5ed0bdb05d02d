// Berth on a host whose `/` is a shared mount, as systemd makes it on every host (this test machine's init keeps
// it private, and the other suites run on that). The disk attacks (attack-disk.test.ts: bounded run disks, a
// restart's clean-up of a killed process's disks, nothing left at stop) and the workspace-run attacks run again
// inside a mount namespace of their own whose `/` is made shared, so nothing of it reaches the other shard.
// Before Berth gave its run and workspace mount roots a peer group of their own, every run disk appeared twice
// in the mount table there and a restart's clean-up left one copy mounted (attack-disk's restart case failed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
/** This runner's environment without its marker: a node --test started with it reports to this runner, not on stdout. */
const { NODE_TEST_CONTEXT: _runner, ...ENV } = process.env;

for (const file of ['attack-disk.test.ts', 'attack-workspace-runs.test.ts']) {
  test(`${file} passes on a shared /`, { timeout: 600_000 }, async () => {
    const script = `mount --make-shared / && [ "$(findmnt -no PROPAGATION /)" = shared ] && exec node --import tsx --test --test-concurrency=1 --test-timeout=500000 test/integration/${file}`;
    const { stdout } = await exec('unshare', ['--mount', 'bash', '-ec', script], { cwd: REPO, env: ENV, maxBuffer: 64 * 1024 * 1024, timeout: 560_000 }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      assert.fail(`${file} failed on a shared /:\n${(error.stdout ?? '').split('\n').filter((line) => /not ok|Error|expected|actual/.test(line)).slice(0, 40).join('\n')}\n${error.message}`);
    });
    assert.match(stdout, /^# fail 0$/m, stdout.slice(-2000));
    assert.doesNotMatch(stdout, /^# pass 0$/m, 'its tests ran');
  });
}
