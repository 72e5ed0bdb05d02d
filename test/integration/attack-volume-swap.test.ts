// Finding 1, performed for real: a caller who can write in an allowed tree swaps a checked directory for a
// symlink to `/` in a loop while volume requests arrive. Berth must mount exactly what it checked: every
// accepted mount shows the directory's own content, never the host's root.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { runLoad } from '../support/load.js';
import { HostPathError, VolumeStaging } from '../../src/runtime/volume-staging.js';
import { resolveAllowedHostPath, nodeRealpathFs } from '../../src/core/validation/volumes.js';
import { BerthError } from '../../src/errors.js';

const SWAP_SECONDS = 30;
const STAGINGS = 1000;

describe('the check-then-mount race on volumes', () => {
  let t: TestBerth;
  let root: string;
  let allowed: string;
  let swapper: ChildProcess;

  before(async () => {
    root = join(process.env.TMPDIR ?? '/tmp', `berth-attack-swap-${process.pid}`);
    allowed = join(root, 'allowed');
    await mkdir(join(allowed, 't', 'x'), { recursive: true });
    await chmod(join(allowed, 't'), 0o777);
    await writeFile(join(allowed, 't', 'x', 'marker'), 'the checked directory\n');
    t = await startTestBerth({ SERVICE_AGENT_ALLOWED_VOLUMES: allowed });
    // The attacker's loop, as a run with a writable allowed tree would perform it.
    swapper = spawn('bash', ['-c', 'cd "$1" && while :; do mv x x.d; ln -s / x; rm x; mv x.d x; done', 'swapper', join(allowed, 't')], { stdio: 'ignore' });
  });
  after(async () => {
    swapper?.kill('SIGKILL');
    await t?.stop();
    await rm(root, { recursive: true, force: true });
  });

  test(`${STAGINGS} validated mounts and ${SWAP_SECONDS} s of runs during the swap loop: 0 mounts outside the allowlist`, async (ctx) => {
    const stopAt = Date.now() + SWAP_SECONDS * 1000;
    const staging = new VolumeStaging({ dir: join(root, 'staging'), hostDir: join(root, 'staging') });
    await staging.init();
    const policy = { allowedVolumes: [allowed], allowAllVolumes: false, protectedPaths: [] };
    const mounts = { accepted: 0, refused: 0, escaped: 0 };

    // Berth's own two steps, validate then stage, as a run takes them; each accepted mount is inspected.
    let attempt = 0;
    const stageOnce = async () => {
      const id = `swap-${attempt++}`;
      let resolved: string;
      try {
        resolved = await resolveAllowedHostPath({ field: 'container.volumes[0]', hostPath: join(allowed, 't', 'x'), containerPath: '/x', readOnly: true, options: [] }, policy, nodeRealpathFs);
      } catch (error) {
        if (!(error instanceof BerthError)) throw error;
        mounts.refused++;
        return;
      }
      try {
        const staged = await staging.stage(id, [resolved], [true]);
        try {
          const seen = await readdir(staged.hostPaths[0]!);
          mounts.accepted++;
          if (seen.join(',') !== 'marker') mounts.escaped++;
        } finally {
          await staged.release();
        }
      } catch (error) {
        if (!(error instanceof HostPathError)) throw error;
        mounts.refused++;
      }
    };
    const stagings = (async () => {
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next++ < STAGINGS) await stageOnce();
      }));
    })();

    // Real runs through Berth and Podman during the whole window.
    const runs: { ok: number; refused: number; escaped: number; other: string[] } = { ok: 0, refused: 0, escaped: 0, other: [] };
    const runsDone = (async () => {
      while (Date.now() < stopAt) {
        const batch = await Promise.all(
          Array.from({ length: 4 }, () => t.request('POST', '/run', { prompt: 'run: ls -A /x', container: { volumes: [`${allowed}/t/x:/x:ro`] } })),
        );
        for (const response of batch) {
          if (response.status === 200) {
            runs.ok++;
            if (response.body.output !== 'marker') runs.escaped++;
          } else if (response.status === 400 && /container\.volumes\[0\]/.test(response.body.error)) runs.refused++;
          else runs.other.push(`${response.status} ${JSON.stringify(response.body)}`);
        }
      }
    })();
    await Promise.all([stagings, runsDone]);
    ctx.diagnostic(`mounts: ${JSON.stringify(mounts)}; runs: ${JSON.stringify({ ...runs, other: runs.other.length })}`);

    assert.equal(mounts.accepted + mounts.refused, STAGINGS);
    assert.ok(mounts.accepted > 0 && mounts.refused > 0, 'the loop really raced the checks');
    assert.equal(mounts.escaped, 0, 'no accepted mount showed anything but the checked directory');
    assert.equal(runs.escaped, 0, 'no run saw anything but the checked directory');
    assert.ok(runs.ok > 0, 'some runs got their mount');
    assert.deepEqual(runs.other, [], 'every run either mounted the directory or was refused with a 400 naming the volume');
    assert.deepEqual(await readdir(join(root, 'staging')), [], 'no staging mount is left');
    assert.deepEqual(await t.leftovers(), []);
  });
});
