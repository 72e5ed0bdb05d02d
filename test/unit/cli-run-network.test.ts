// berth run and berth agents spawn --network/--allow: the egress policy the command line sends as
// container.network. --allow (repeatable) is an allowlist of exactly those hosts, --network alone a mode,
// neither the server's default; a contradiction is a usage error before anything is sent. A streamed run
// (the default) sends the policy as GET /run/stream's network and allow query parameters.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommanderError } from 'commander';
import type { Berth, RunRequest, SpawnRequest, StreamRequest } from '@berth/client';
import { agentsCommand } from '../../packages/cli/src/commands/agents.js';
import { runCommand } from '../../packages/cli/src/commands/run.js';
import type { Context } from '../../packages/cli/src/context.js';
import { Output } from '../../packages/cli/src/output.js';

interface Parsed {
  /** What the command sent, and by which call (a stream's query as it is). */
  readonly sent?: { call: 'run' | 'runAsync'; request: RunRequest } | { call: 'stream'; request: StreamRequest };
  /** What commander printed on stderr (usage errors). */
  readonly stderr: string;
  readonly exitCode?: number;
}

/** Parses `berth run <args>` with a stand-in for Berth that records the request instead of sending it. */
async function parse(...args: string[]): Promise<Parsed> {
  let sent: Parsed['sent'];
  let stderr = '';
  const answer = { id: 'run-1', status: 'completed', output: 'ok', session_id: '00000000-0000-4000-8000-000000000000' };
  const berth = {
    run: async (request: RunRequest) => ((sent = { call: 'run', request }), answer),
    runAsync: async (request: RunRequest) => ((sent = { call: 'runAsync', request }), { job_id: 'job-1', session_id: answer.session_id }),
    stream: (request: StreamRequest) => {
      sent = { call: 'stream', request };
      return (async function* () {
        yield { type: 'done', session_id: answer.session_id, id: 'run-1' };
      })();
    },
  } as unknown as Berth;
  const context: Context = { url: 'http://berth.test', berth, output: new Output('table', { write: () => true }), credentials: undefined as never };
  const command = runCommand(() => context)
    .exitOverride()
    .configureOutput({ writeErr: (text) => (stderr += text), writeOut: () => undefined });
  try {
    await command.parseAsync(args, { from: 'user' });
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    return { sent, stderr, exitCode: error.exitCode };
  }
  return { sent, stderr };
}

/** The egress policy a parsed command sent: container.network of a run, the query parameters of a stream. */
function policySent(sent: Parsed['sent']): unknown {
  if (sent?.call !== 'stream') return sent?.request.container?.network;
  const { network, allow } = sent.request;
  return network === undefined && allow === undefined ? undefined : { network, allow };
}

describe('berth run --network and --allow', () => {
  it('sends no container.network without either option: the server default applies', async () => {
    const { sent } = await parse('say: hi');
    assert.equal(sent?.call, 'stream');
    assert.equal(policySent(sent), undefined);
  });

  it('--allow, repeated, is an allowlist of exactly those hosts', async () => {
    const streamed = await parse('--allow', 'pypi.org', '--allow', '*.npmjs.org', '--allow', 'files.example.com:8443', 'run: pip install x');
    assert.deepEqual(policySent(streamed.sent), { network: 'allowlist', allow: 'pypi.org,*.npmjs.org,files.example.com:8443' });
    const answered = await parse('--json', '--allow', 'pypi.org', '--allow', '*.npmjs.org', 'x');
    assert.deepEqual(policySent(answered.sent), { mode: 'allowlist', allow: ['pypi.org', '*.npmjs.org'] });
  });

  it('--network with --allow allowlist is the same allowlist', async () => {
    const { sent } = await parse('--json', '--network', 'allowlist', '--allow', 'pypi.org', 'x');
    assert.deepEqual(policySent(sent), { mode: 'allowlist', allow: ['pypi.org'] });
  });

  it('--network alone sends the mode (allowlist: the server\'s default list)', async () => {
    for (const mode of ['none', 'open', 'allowlist'] as const) {
      assert.deepEqual(policySent((await parse('--json', '--network', mode, 'x')).sent), { mode }, mode);
      assert.deepEqual(policySent((await parse('--network', mode, 'x')).sent), { network: mode, allow: undefined }, mode);
    }
  });

  it('keeps the other container options beside the network', async () => {
    const { sent } = await parse('--memory', '1g', '--network', 'none', 'x');
    assert.equal(sent?.call, 'run');
    assert.deepEqual(sent.request.container, { memory: '1g', network: { mode: 'none' } });
  });

  it('a run with only a network policy still streams (GET /run/stream takes it); other container options need POST /run; --async is POST /run/async', async () => {
    assert.equal((await parse('x')).sent?.call, 'stream');
    assert.equal((await parse('--allow', 'pypi.org', 'x')).sent?.call, 'stream');
    assert.equal((await parse('--memory', '1g', '--allow', 'pypi.org', 'x')).sent?.call, 'run');
    const queued = await parse('--async', '--network', 'none', 'x');
    assert.equal(queued.sent?.call, 'runAsync');
    assert.deepEqual(queued.sent?.request.container?.network, { mode: 'none' });
  });

  it('refuses --allow with --network none or open before sending anything', async () => {
    for (const mode of ['none', 'open']) {
      const { sent, stderr, exitCode } = await parse('--network', mode, '--allow', 'pypi.org', 'x');
      assert.equal(sent, undefined, mode);
      assert.equal(exitCode, 1);
      assert.match(stderr, new RegExp(`--allow lists the hosts of an allowlist; it cannot go with --network ${mode}`));
    }
  });

  it('refuses a mode that is not one of none, allowlist, open', async () => {
    const { sent, stderr, exitCode } = await parse('--network', 'bridge', 'x');
    assert.equal(sent, undefined);
    assert.equal(exitCode, 1);
    assert.match(stderr, /Allowed choices are none, allowlist, open/);
  });
});

describe('berth agents spawn --network and --allow', () => {
  /** Parses `berth agents spawn <args>`; answers the body sent, or the usage error. */
  async function spawn(...args: string[]): Promise<{ sent?: SpawnRequest; stderr: string }> {
    let sent: SpawnRequest | undefined;
    let stderr = '';
    const snapshot = { id: 'agent-1', session_id: '00000000-0000-4000-8000-000000000000', status: 'starting', created_at: '2030-01-01T00:00:00.000Z', last_activity_at: '2030-01-01T00:00:00.000Z', idle_timeout_seconds: 1800, turns_completed: 0 };
    const berth = { agents: { spawn: async (request: SpawnRequest) => ((sent = request), snapshot) } } as unknown as Berth;
    const context: Context = { url: 'http://berth.test', berth, output: new Output('json', { write: () => true }), credentials: undefined as never };
    const command = agentsCommand(() => context)
      .exitOverride()
      .configureOutput({ writeErr: (text) => (stderr += text), writeOut: () => undefined });
    for (const sub of command.commands) sub.exitOverride().configureOutput({ writeErr: (text) => (stderr += text), writeOut: () => undefined });
    try {
      await command.parseAsync(['spawn', ...args], { from: 'user' });
    } catch (error) {
      if (!(error instanceof CommanderError)) throw error;
    }
    return { sent, stderr };
  }

  it('sends container.network with the agent, nothing else of the container options', async () => {
    assert.deepEqual((await spawn('--allow', 'pypi.org', '--allow', '*.npmjs.org')).sent?.container, { network: { mode: 'allowlist', allow: ['pypi.org', '*.npmjs.org'] } });
    assert.deepEqual((await spawn('--network', 'none')).sent?.container, { network: { mode: 'none' } });
    assert.equal((await spawn()).sent?.container, undefined);
  });

  it('refuses --allow with --network open before spawning', async () => {
    const { sent, stderr } = await spawn('--network', 'open', '--allow', 'pypi.org');
    assert.equal(sent, undefined);
    assert.match(stderr, /--allow lists the hosts of an allowlist; it cannot go with --network open/);
  });
});
