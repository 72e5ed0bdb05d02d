import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildEngineInvocation, type EngineSession } from '../../src/engine/command.js';
import type { EnginePlan } from '../../src/core/run-plan.js';

const SESSION = '11111111-2222-4333-8444-555555555555';
const OTHER = '66666666-7777-4888-9999-aaaaaaaaaaaa';

function invoke(engine: EnginePlan, session: EngineSession = { kind: 'new', sessionId: SESSION }, offlineModel = false) {
  const invocation = buildEngineInvocation({ engine, session, prompt: 'the prompt', modelBaseUrl: 'http://model:1', offlineModel, engineBinary: '/opt/claude/claude' });
  const [shell, dashC, script, name, ...argv] = invocation.command;
  assert.equal(shell, '/bin/sh');
  assert.equal(dashC, '-c');
  assert.equal(name, 'berth-launch');
  return { argv, env: invocation.env, files: invocation.inputFiles, script: script! };
}

function flagValue(argv: string[], flag: string): string | undefined {
  const index = argv.indexOf(flag);
  return index === -1 ? undefined : argv[index + 1];
}

test('the engine always runs headless with stream-json output and the prompt on stdin from a file', () => {
  const { argv, files, script } = invoke({});
  assert.deepEqual(argv.slice(0, 6), ['/opt/claude/claude', '-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages']);
  assert.equal(files.prompt, 'the prompt');
  assert.ok(!argv.includes('the prompt'), 'the prompt never appears in argv');
  assert.match(script, /exec "\$@" < \/run\/berth\/input\/prompt/);
});

test('the launch script is constant: caller values never become shell words', () => {
  const hostile = invoke({ model: '$(rm -rf /)', system_prompt: '`id`', allowed_tools: ['; reboot'] });
  const plain = invoke({});
  assert.equal(hostile.script, plain.script);
});

const mappings: [string, EnginePlan, string, string | undefined][] = [
  ['model', { model: 'sonnet' }, '--model', 'sonnet'],
  ['system_prompt', { system_prompt: 'be brief' }, '--system-prompt-file', '/run/berth/input/system-prompt'],
  ['append_system_prompt', { append_system_prompt: 'and kind' }, '--append-system-prompt-file', '/run/berth/input/append-system-prompt'],
  ['json_schema', { json_schema: { type: 'object' } }, '--json-schema', '{"type":"object"}'],
  ['max_turns', { max_turns: 7 }, '--max-turns', '7'],
  ['effort', { effort: 'xhigh' }, '--effort', 'xhigh'],
];

for (const [option, engine, flag, value] of mappings) {
  test(`engine.${option} maps to ${flag}`, () => {
    assert.equal(flagValue(invoke(engine).argv, flag), value);
  });
}

test('max_budget_usd is the model gateway\'s to enforce: the engine gets no --max-budget-usd', () => {
  const { argv } = invoke({ max_budget_usd: 1.5 });
  assert.ok(!argv.includes('--max-budget-usd'));
  assert.ok(!argv.includes('1.5'));
});

test('system prompts travel as files, not argv', () => {
  const { files, argv } = invoke({ system_prompt: 'S'.repeat(200_000), append_system_prompt: 'A' });
  assert.equal(files['system-prompt']!.length, 200_000);
  assert.equal(files['append-system-prompt'], 'A');
  assert.ok(argv.every((arg) => arg.length < 1000));
});

test('allowed_tools and disallowed_tools repeat their flag once per tool', () => {
  const { argv } = invoke({ allowed_tools: ['Bash(git:*)', 'Read'], disallowed_tools: ['WebFetch'] });
  assert.deepEqual(argv.filter((_, i) => argv[i - 1] === '--allowedTools'), ['Bash(git:*)', 'Read']);
  assert.deepEqual(argv.filter((_, i) => argv[i - 1] === '--disallowedTools'), ['WebFetch']);
});

test('max_turns 0 means unlimited: no flag', () => {
  assert.equal(invoke({ max_turns: 0 }).argv.includes('--max-turns'), false);
});

test('dangerously_skip_permissions defaults to on and can be turned off', () => {
  assert.ok(invoke({}).argv.includes('--dangerously-skip-permissions'));
  assert.ok(invoke({ dangerously_skip_permissions: true }).argv.includes('--dangerously-skip-permissions'));
  assert.ok(!invoke({ dangerously_skip_permissions: false }).argv.includes('--dangerously-skip-permissions'));
});

test('output_format does not change the engine flags (Berth always reads stream-json)', () => {
  assert.deepEqual(invoke({ output_format: 'text' }).argv, invoke({ output_format: 'json' }).argv);
});

const environment: [string, EnginePlan, Record<string, string>][] = [
  ['prompt_caching_ttl 1h', { prompt_caching_ttl: '1h' }, { ENABLE_PROMPT_CACHING_1H: '1' }],
  ['prompt_caching_ttl 5m', { prompt_caching_ttl: '5m' }, { FORCE_PROMPT_CACHING_5M: '1' }],
  ['bedrock_service_tier', { bedrock_service_tier: 'flex' }, { ANTHROPIC_BEDROCK_SERVICE_TIER: 'flex' }],
  ['enable_powershell_tool', { enable_powershell_tool: true }, { CLAUDE_CODE_USE_POWERSHELL_TOOL: '1' }],
];

for (const [name, engine, expected] of environment) {
  test(`${name} sets its environment switch`, () => {
    const { env } = invoke(engine);
    for (const [key, value] of Object.entries(expected)) assert.equal(env[key], value);
  });
}

test('the base environment points the engine at the model and the session directory, without credentials', () => {
  const { env } = invoke({});
  assert.equal(env.ANTHROPIC_BASE_URL, 'http://model:1');
  assert.equal(env.CLAUDE_CONFIG_DIR, '/var/lib/berth/engine');
  assert.equal(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
  assert.equal(env.ANTHROPIC_API_KEY, undefined);
  assert.equal(env.CLAUDE_CODE_MAX_RETRIES, undefined);
  assert.equal(invoke({}, undefined, true).env.CLAUDE_CODE_MAX_RETRIES, '0');
});

test('session kinds map to the engine\'s session flags', () => {
  assert.equal(flagValue(invoke({}, { kind: 'new', sessionId: SESSION }).argv, '--session-id'), SESSION);
  const resume = invoke({}, { kind: 'resume', sessionId: SESSION }).argv;
  assert.equal(flagValue(resume, '--resume'), SESSION);
  assert.ok(!resume.includes('--session-id'));
  const fork = invoke({}, { kind: 'fork', fromSessionId: SESSION, sessionId: OTHER }).argv;
  assert.equal(flagValue(fork, '--resume'), SESSION);
  assert.ok(fork.includes('--fork-session'));
  assert.equal(flagValue(fork, '--session-id'), OTHER);
  const ephemeral = invoke({}, { kind: 'ephemeral', sessionId: SESSION }).argv;
  assert.ok(ephemeral.includes('--no-session-persistence'));
});

test('lifecycle hooks become a script of shell-escaped commands, create hooks only on a first start', async () => {
  const { hooksScript, shellQuote } = await import('../../src/engine/command.js');
  const lifecycle = { onCreate: ['echo', "it's $(id)"], postCreate: ['touch', '/tmp/created'], postStart: ['echo', 'start'], timeoutMs: 90_500 };
  assert.equal(shellQuote("it's $(id)"), `'it'\\''s $(id)'`);
  assert.equal(hooksScript(lifecycle, true), `'echo' 'it'\\''s $(id)'\n'touch' '/tmp/created'\n'echo' 'start'\n`);
  assert.equal(hooksScript(lifecycle, false), `'echo' 'start'\n`);
  assert.equal(hooksScript({ onCreate: [], postCreate: [], postStart: [], timeoutMs: 1000 }, true), undefined);
  const fresh = buildEngineInvocation({ engine: {}, session: { kind: 'new', sessionId: SESSION }, prompt: 'p', modelBaseUrl: 'u', offlineModel: false, lifecycle, engineBinary: '/opt/claude/claude' });
  assert.equal(fresh.env.BERTH_HOOKS_TIMEOUT, '91');
  assert.ok(fresh.inputFiles['hooks.sh']!.includes('/tmp/created'));
  const resumed = buildEngineInvocation({ engine: {}, session: { kind: 'resume', sessionId: SESSION }, prompt: 'p', modelBaseUrl: 'u', offlineModel: false, lifecycle, engineBinary: '/opt/claude/claude' });
  assert.ok(!resumed.inputFiles['hooks.sh']!.includes('/tmp/created'));
});

test('interactive (persistent agent): turns come as stream-json on stdin, no prompt file, no partial messages', () => {
  const invocation = buildEngineInvocation({
    engine: {}, session: { kind: 'new', sessionId: SESSION }, prompt: 'ignored', modelBaseUrl: 'http://model:1', offlineModel: false, interactive: true, engineBinary: '/opt/claude/claude',
  });
  const [, , script, , ...argv] = invocation.command;
  assert.deepEqual(argv.slice(0, 6), ['/opt/claude/claude', '-p', '--input-format', 'stream-json', '--output-format', 'stream-json']);
  assert.ok(argv.includes('--verbose'));
  assert.ok(!argv.includes('--include-partial-messages'));
  assert.equal(flagValue(argv, '--session-id'), SESSION);
  assert.deepEqual(invocation.inputFiles, {});
  assert.match(script!, /exec "\$@" <> \/run\/berth\/input\/turns$/, 'its turns FIFO, opened read-write: never an end of input');
  assert.ok(!script!.includes('/run/berth/input/prompt'));
});

test('the launch script exports the gateway file after the caller\'s secrets and before the hooks', async () => {
  const { mkdtemp, mkdir, rm, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { execFile } = await import('node:child_process');
  const { promisify } = await import('node:util');
  const { gatewayEnvFile, gatewayEnvironment } = await import('../../src/engine/command.js');
  const dir = await mkdtemp(join(tmpdir(), 'berth-launch-'));
  try {
    const lifecycle = { onCreate: ['sh', '-c', 'echo "hook:$ANTHROPIC_API_KEY $HTTPS_PROXY" >&2'], postCreate: [], postStart: [], timeoutMs: 10_000 };
    const invocation = buildEngineInvocation({ engine: {}, session: { kind: 'new', sessionId: SESSION }, prompt: 'p', modelBaseUrl: 'http://10.89.0.1:8788', offlineModel: false, lifecycle, engineBinary: '/opt/claude/claude' });
    // The script's fixed paths, moved into a directory of the test's own.
    const [, , script] = invocation.command;
    const local = script!.replaceAll('/run/berth/', `${dir}/`);
    await mkdir(join(dir, 'env'));
    await mkdir(join(dir, 'input'));
    // A caller's secret of the same name must not win over the gateway's credential.
    await writeFile(join(dir, 'env', 'ANTHROPIC_API_KEY'), 'callers-own-value');
    await writeFile(join(dir, 'env', 'GH_TOKEN'), 'gh');
    const token = `brt_${'ab'.repeat(32)}`;
    await writeFile(join(dir, 'input', 'gateway.env'), gatewayEnvFile(gatewayEnvironment('http://10.89.0.1:8788', token)));
    for (const [name, content] of Object.entries(invocation.inputFiles)) await writeFile(join(dir, 'input', name), content);
    const engine = ['sh', '-c', 'echo "engine:$ANTHROPIC_API_KEY $HTTP_PROXY $no_proxy $GH_TOKEN"'];
    const { stdout, stderr } = await promisify(execFile)('/bin/sh', ['-c', local, 'berth-launch', ...engine], { env: { PATH: process.env.PATH, ...invocation.env } });
    assert.equal(stdout.trim(), `engine:${token} http://berth:${token}@10.89.0.1:8788 10.89.0.1,localhost,127.0.0.1 gh`);
    assert.equal(stderr.trim(), `hook:${token} http://berth:${token}@10.89.0.1:8788`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the gateway file refuses what could break its lines', async () => {
  const { gatewayEnvFile } = await import('../../src/engine/command.js');
  assert.throws(() => gatewayEnvFile({ A: 'x\nB=y' }), /not a variable/);
  assert.throws(() => gatewayEnvFile({ 'A B': 'x' }), /not a variable/);
  assert.equal(gatewayEnvFile({ A: 'x', b_2: 'y=z' }), 'A=x\nb_2=y=z\n');
});
