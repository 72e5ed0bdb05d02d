// Containers never outlive their run: a client that disconnects, a service that shuts down, and a service
// that was killed (its leftovers are reaped at the next start) all end with no Berth container left.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);

async function containersOf(instance: string): Promise<string[]> {
  const { stdout } = await run('podman', ['ps', '-a', '--filter', `label=berth.instance=${instance}`, '--format', '{{.Names}}']);
  return stdout.split('\n').filter(Boolean);
}

/** Starts a run that would last ten minutes; resolves once its container exists (not when it ends). */
async function startLongRun(t: TestBerth, signal?: AbortSignal): Promise<{ response: Promise<unknown> }> {
  const pending = fetch(`${t.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'run: /bin/sleep 600' }),
    signal,
  }).catch((error: unknown) => error);
  await waitFor('the run container', async () => ((await t.leftovers()).length > 0 ? true : undefined));
  return { response: pending };
}

test('a client that disconnects stops its run and the container is removed', async () => {
  const t = await startTestBerth();
  try {
    const controller = new AbortController();
    const { response } = await startLongRun(t, controller.signal);
    const started = Date.now();
    controller.abort();
    await response;
    await waitFor('the container to be removed', async () => ((await t.leftovers()).length === 0 ? true : undefined), 15_000);
    assert.ok(Date.now() - started < 15_000);
  } finally {
    await t.stop();
  }
});

test('service shutdown cancels runs in flight and removes their containers', async () => {
  const t = await startTestBerth();
  const instance = t.config.instanceName;
  const { response } = await startLongRun(t);
  await t.stop();
  const answered = (await response) as Response;
  assert.equal(answered.status, 503, 'a run the stop cancelled is the service\'s refusal, not a failure of the run');
  const body = (await answered.json()) as { error: string; status: string };
  assert.equal(body.status, 'error');
  assert.match(body.error, /shutting down and stopped this run; session [0-9a-f-]{36} keeps what the engine wrote/);
  assert.deepEqual(await containersOf(instance), []);
});

test('at start-up Berth removes containers a previous process of the same instance left', async () => {
  const first = await startTestBerth();
  const instance = first.config.instanceName;
  await first.stop();
  // What a killed process leaves: a container carrying this instance's label.
  await run('podman', ['create', '--name', `berth-leftover-${instance}`, '--label', `berth.instance=${instance}`, '--label', 'berth.run=run-old',
    first.config.agent.image, 'true']);
  await run('podman', ['create', '--name', `other-${instance}`, '--label', 'berth.instance=someone-else', first.config.agent.image, 'true']);
  try {
    const second = await startTestBerth({ SERVICE_INSTANCE_NAME: instance });
    try {
      // Listed first, then the pool asked: it names its engines before they exist, so none listed is missed.
      const listed = await containersOf(instance);
      const pooled = new Set(second.berth.pools.ownContainerNames());
      assert.deepEqual(listed.filter((name) => !pooled.has(name)), []);
      assert.ok((await containersOf('someone-else')).includes(`other-${instance}`), 'another instance\'s containers are not touched');
    } finally {
      await second.stop();
    }
  } finally {
    await run('podman', ['rm', '--force', '--ignore', `other-${instance}`, `berth-leftover-${instance}`]);
  }
});
