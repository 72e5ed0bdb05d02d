// SIGTERM with SERVICE_SHUTDOWN_MODE=drain: new work is refused first, the drain says what it still waits
// for while it waits, and only then is the rest of the work stopped.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger } from 'pino';
import { stopWork, type ShutdownWork } from '../../src/core/shutdown.js';

test('a drain logs what is still in flight until it has ended, then stops the rest', async () => {
  const steps: string[] = [];
  const logged: { fields: unknown; message: string }[] = [];
  const log = {
    info: (fields: unknown, message?: string) => logged.push(typeof fields === 'string' ? { fields: {}, message: fields } : { fields, message: message ?? '' }),
    warn: (fields: unknown, message?: string) => logged.push({ fields, message: message ?? '' }),
  } as unknown as Logger;
  let runs = ['run-1'];
  const work: ShutdownWork = {
    pools: { close: async () => void steps.push('pools closed') },
    runs: {
      stopAccepting: () => void steps.push('runs refused'),
      drain: async () => {
        await new Promise((resolve) => setTimeout(resolve, 200));
        runs = [];
      },
    },
    jobs: { idle: async () => undefined, detach: async () => undefined },
    agents: {
      stopAccepting: () => void steps.push('agents refused'),
      turnsDone: async () => undefined,
      detach: async () => undefined,
      close: async () => void steps.push('agents closed'),
    },
    abortRuns: () => void steps.push('runs aborted'),
    inFlight: () => ({ runs, jobs: [], agents: [] }),
  };
  await stopWork({ mode: 'drain', drainTimeoutMs: 5_000, drainProgressMs: 40 }, work, log);
  assert.deepEqual(steps, ['runs refused', 'agents refused', 'pools closed', 'runs aborted', 'agents closed']);
  const progress = logged.filter((entry) => entry.message === 'draining: still in flight');
  assert.ok(progress.length >= 2, `progress was logged ${progress.length} times`);
  assert.deepEqual(progress[0]!.fields, { runs: ['run-1'], jobs: [], agents: [] });
  assert.equal(logged.at(-1)!.message, 'drained: no work in flight');
});
