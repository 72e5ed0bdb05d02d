// The host-command helpers (runtime/host-commands.ts) on a real /bin/sh: arguments arrive as given (spaces,
// quotes, globs, `$(...)` never interpreted), output and exit codes come back whole, commands run side by
// side, a helper that dies is replaced, and arguments the line protocol cannot carry are spawned directly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HostCommandError, runHostCommand, stopHostCommandHelpers } from '../../src/runtime/host-commands.js';

test('arguments reach the command as they are, none interpreted by the shell', async () => {
  const args = ['a b', '"quoted"', "it's", '*', '$(touch /tmp/never)', '`id`', '; rm -rf /', '', 'ünïcödé', '-n'];
  const { stdout } = await runHostCommand('printf', ['%s|', ...args]);
  assert.equal(stdout, `${args.join('|')}|`);
});

test('a failing command rejects with its exit code and its output, as execFile would', async () => {
  await assert.rejects(runHostCommand('sh', ['-c', 'echo went wrong >&2; echo and out; exit 3']), (error: unknown) => {
    assert.ok(error instanceof HostCommandError);
    assert.equal(error.code, 3);
    assert.match(error.stderr, /went wrong/);
    assert.match(error.stderr, /and out/);
    assert.match(error.message, /^Command failed: sh -c/);
    return true;
  });
  await assert.rejects(runHostCommand('/nonexistent/command', []), (error: unknown) => error instanceof HostCommandError && error.code === 127);
});

test('output of any size and content comes back whole, and the next answer is not confused by it', async () => {
  const big = await runHostCommand('sh', ['-c', 'i=0; while [ $i -lt 5000 ]; do echo "line $i with 0 1 and ünïcödé"; i=$((i + 1)); done']);
  const lines = big.stdout.split('\n');
  assert.equal(lines.length, 5000);
  assert.equal(lines[4999], 'line 4999 with 0 1 and ünïcödé');
  assert.equal((await runHostCommand('echo', ['next'])).stdout, 'next');
});

test('commands run side by side, each answer to its own caller', async () => {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: 12 }, (_, index) => runHostCommand('sh', ['-c', `sleep 0.2; echo ${index}`])));
  assert.deepEqual(answers.map((answer) => answer.stdout), Array.from({ length: 12 }, (_, index) => String(index)));
  // Three helpers: 12 commands of 0.2 s take about 0.8 s, not 2.4 s (one at a time).
  assert.ok(performance.now() - started < 2_000, `took ${performance.now() - started} ms`);
});

test('a helper that dies fails only its own command; the next command gets a new helper', async () => {
  const dying = runHostCommand('sh', ['-c', 'kill -9 $PPID; sleep 5']);
  await assert.rejects(dying, /the host command helper exited/);
  assert.equal((await runHostCommand('echo', ['alive'])).stdout, 'alive');
});

test('arguments with a newline or NUL are spawned directly, not sent over the line protocol', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'host-commands-'));
  try {
    await runHostCommand('touch', [join(dir, 'two\nlines')]);
    assert.deepEqual(await readdir(dir), ['two\nlines']);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('stopped helpers finish and later commands start new ones', async () => {
  stopHostCommandHelpers();
  assert.equal((await runHostCommand('echo', ['again'])).stdout, 'again');
  stopHostCommandHelpers();
});
