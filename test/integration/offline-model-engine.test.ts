// Drives the real engine binary on the host (no container) against the offline model, so the
// directives are checked against the request shapes Claude Code actually sends.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startOfflineModel, type OfflineModel } from '../../src/offline-model/server.js';

const ENGINE = join(import.meta.dirname, '../../node_modules/@anthropic-ai/claude-code-linux-x64/claude');
const skip = existsSync(ENGINE) ? false : `engine binary not installed at ${ENGINE}`;
const KEY = 'offline-test-key';
const RUN_TIMEOUT_MS = 25_000;

let model: OfflineModel;
const temporary: string[] = [];

before(async () => {
  model = await startOfflineModel({ port: 0, apiKey: KEY });
});

after(async () => {
  await model.close();
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
});

function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `berth-offline-${label}-`));
  temporary.push(dir);
  return dir;
}

/** A fresh engine home and working directory; pass `home` again to resume its sessions. */
function engineDirs(home = tempDir('config')): { home: string; cwd: string } {
  return { home, cwd: tempDir('work') };
}

interface EngineRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runEngine(prompt: string, args: readonly string[], dirs: { home: string; cwd: string }, key = KEY): Promise<EngineRun> {
  // Inherited ANTHROPIC_* / CLAUDE_* variables (a developer's real key) must not leak into the run.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(ANTHROPIC_|CLAUDE_)/.test(name)));
  const child = spawn(ENGINE, ['-p', '--dangerously-skip-permissions', ...args], {
    cwd: dirs.cwd,
    env: {
      ...inherited,
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: key,
      CLAUDE_CONFIG_DIR: dirs.home,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_RETRIES: '0',
      IS_SANDBOX: '1',
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(prompt);
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function runJson(prompt: string, dirs = engineDirs(), extraArgs: readonly string[] = [], key = KEY) {
  const run = await runEngine(prompt, ['--output-format', 'json', ...extraArgs], dirs, key);
  let envelope: Record<string, any>;
  try {
    envelope = JSON.parse(run.stdout);
  } catch {
    assert.fail(`engine printed no JSON envelope (exit ${run.code}): ${run.stdout}\n${run.stderr}`);
  }
  return { code: run.code, envelope };
}

test('a plain prompt is echoed, with usage and cost counted', { skip }, async () => {
  const { code, envelope } = await runJson('hello offline model\n');
  assert.equal(code, 0);
  assert.equal(envelope.is_error, false);
  assert.equal(envelope.result, 'offline model: hello offline model');
  assert.ok(envelope.usage.input_tokens > 0);
  assert.equal(envelope.usage.output_tokens, Math.ceil('offline model: hello offline model'.length / 4));
  assert.ok(envelope.total_cost_usd > 0);
});

test('say: makes the answer exactly its text', { skip }, async () => {
  const { envelope } = await runJson('say: first line\nsay: second line');
  assert.equal(envelope.result, 'first line\nsecond line');
  assert.equal(envelope.num_turns, 1);
});

test('run: has the engine execute the command and answers with its output', { skip }, async () => {
  const dirs = engineDirs();
  const { envelope } = await runJson('run: echo made-$((6*7)) | tee proof.txt\nsay: finished', dirs);
  assert.equal(envelope.is_error, false);
  assert.equal(envelope.result, 'made-42\nfinished');
  assert.equal(envelope.num_turns, 2);
  assert.equal(readFileSync(join(dirs.cwd, 'proof.txt'), 'utf8'), 'made-42\n');
});

test('several run: lines run in turn', { skip }, async () => {
  const { envelope } = await runJson('run: echo one\nrun: echo two');
  assert.equal(envelope.result, 'one\ntwo');
  assert.equal(envelope.num_turns, 3);
});

test('json: with --json-schema fills structured_output', { skip }, async () => {
  const schema = JSON.stringify({ type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] });
  const { code, envelope } = await runJson('json: {"answer": 42}', engineDirs(), ['--json-schema', schema]);
  assert.equal(code, 0);
  assert.equal(envelope.is_error, false);
  assert.deepEqual(envelope.structured_output, { answer: 42 });
});

test('recall: after --resume lists the earlier prompts of the session', { skip }, async () => {
  const home = tempDir('config');
  const first = await runJson('remember the lighthouse', engineDirs(home));
  const sessionId: string = first.envelope.session_id;
  const second = await runJson('recall:', engineDirs(home), ['--resume', sessionId]);
  assert.equal(second.envelope.session_id, sessionId);
  assert.equal(second.envelope.result, 'remember the lighthouse');
});

test('fail: overloaded ends the run as an API error with exit code 1', { skip }, async () => {
  const { code, envelope } = await runJson('fail: overloaded');
  assert.equal(code, 1);
  assert.equal(envelope.is_error, true);
  assert.equal(envelope.api_error_status, 529);
});

test('a wrong API key is refused', { skip }, async () => {
  const { code, envelope } = await runJson('say: hi', engineDirs(), [], 'wrong-key');
  assert.equal(code, 1);
  assert.equal(envelope.is_error, true);
  assert.equal(envelope.api_error_status, 401);
});

test('slow: reaches the engine as several text deltas over time', { skip }, async () => {
  const started = performance.now();
  const run = await runEngine('slow: 250\nsay: a slowly streamed answer', ['--output-format', 'stream-json', '--verbose', '--include-partial-messages'], engineDirs());
  const elapsed = performance.now() - started;
  const events = run.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
  const deltas = events.filter((event) => event.type === 'stream_event' && event.event.delta?.type === 'text_delta');
  assert.ok(deltas.length >= 3, `${deltas.length} text deltas`);
  assert.equal(events.at(-1).result, 'a slowly streamed answer');
  assert.ok(elapsed >= 3 * 250, `took ${elapsed} ms`);
});
