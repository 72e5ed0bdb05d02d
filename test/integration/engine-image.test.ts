// The engine image settings on real Podman: the engine image pulled at start from a registry when it is
// missing (SERVICE_AGENT_AUTO_PULL_CLI), a clear refusal to start when it cannot be, and the engine run from
// the agent image itself (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { startBerth } from '../../src/server.js';
import { startTestBerth, testEnvironment } from '../support/berth.js';
import { podman, startTestRegistry, type TestRegistry } from '../support/registry.js';

const ENGINE_IN_IMAGE = 'localhost/berth-test-agent-engine:latest';

/** Starting a Berth that must refuse to start: resolves to the error it refused with. */
async function refusedStart(env: Record<string, string>): Promise<Error> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
  try {
    const config = loadConfig({ ...testEnvironment(dir, `test-${randomBytes(4).toString('hex')}`), ...env });
    const berth = await startBerth(config, pino({ level: 'silent' })).catch((error: Error) => error);
    if (!(berth instanceof Error)) {
      await berth.stop();
      assert.fail('Berth started although it should have refused');
    }
    return berth;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('engine image settings', () => {
  let registry: TestRegistry;
  before(async () => {
    registry = await startTestRegistry();
  });
  after(async () => {
    await registry?.stop();
  });

  test('SERVICE_AGENT_AUTO_PULL_CLI pulls a missing engine image at start, with progress in the log', async () => {
    const tag = `pull-${randomBytes(4).toString('hex')}`;
    const repository = `${registry.host}/berth/engine`;
    const engine = loadConfig({ SERVICE_AUTH_ENABLED: 'false' }).agent.engineImage;
    await registry.push(engine, `berth/engine:${tag}`);
    await podman('rmi', '--ignore', `${repository}:${tag}`);
    const logs: string[] = [];
    const t = await startTestBerth(
      {
        SERVICE_AGENT_CLI_IMAGE: repository,
        SERVICE_AGENT_CLI_IMAGE_TAG: tag,
        SERVICE_AGENT_AUTO_PULL_CLI: 'true',
        SERVICE_IMAGE_INSECURE_REGISTRIES: registry.host,
        SERVICE_LOG_LEVEL: 'info',
      },
      { onLog: (record) => logs.push(String(record.msg)) },
    );
    try {
      assert.equal(t.config.agent.engineImage, `${repository}:${tag}`);
      assert.ok(logs.includes('pulling the engine image (SERVICE_AGENT_AUTO_PULL_CLI=true)') && logs.includes('engine image pulled'), logs.join('\n'));
      const run = await t.request('POST', '/run', { prompt: 'say: engine from the registry' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(run.body.output, 'engine from the registry');
    } finally {
      await t.stop();
      await podman('rmi', '--ignore', `${repository}:${tag}`);
    }
  });

  test('a missing engine image stops the start with what to do; an unreachable registry too', async () => {
    const missing = await refusedStart({ SERVICE_ENGINE_IMAGE: 'localhost/berth-engine:does-not-exist' });
    assert.match(missing.message, /engine image localhost\/berth-engine:does-not-exist is not on this host.*SERVICE_AGENT_AUTO_PULL_CLI=true/);
    const unreachable = await refusedStart({
      SERVICE_AGENT_CLI_IMAGE: '127.0.0.1:9/berth/engine',
      SERVICE_AGENT_CLI_IMAGE_TAG: 'nope',
      SERVICE_AGENT_AUTO_PULL_CLI: 'true',
      SERVICE_IMAGE_INSECURE_REGISTRIES: '127.0.0.1:9',
    });
    assert.match(unreachable.message, /could not be pulled \(SERVICE_AGENT_AUTO_PULL_CLI=true\)/);
  });

  test('SERVICE_AGENT_MOUNT_CLAUDE_CLI=false runs the engine the agent image contains, and refuses images without one', async () => {
    const t = await startTestBerth({ SERVICE_AGENT_MOUNT_CLAUDE_CLI: 'false', SERVICE_AGENT_IMAGE: ENGINE_IN_IMAGE });
    try {
      const run = await t.request('POST', '/run', { prompt: 'run: command -v claude; test -e /opt/claude/claude && echo mounted || echo not-mounted' });
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(run.body.output, '/usr/local/bin/claude\nnot-mounted');
      const without = await t.request('POST', '/run', { prompt: 'say: hi', container: { image: loadConfig({ SERVICE_AUTH_ENABLED: 'false' }).agent.image } });
      assert.equal(without.status, 400);
      assert.match(without.body.error, /has no engine.*SERVICE_AGENT_MOUNT_CLAUDE_CLI=false/);
      assert.deepEqual(await t.leftovers(), []);
    } finally {
      await t.stop();
    }
  });
});
