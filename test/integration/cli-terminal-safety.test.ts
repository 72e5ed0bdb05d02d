// The berth command never lets what a container printed act on the operator's terminal. A real Berth's
// engine runs a tool that prints hostile escape sequences (an OSC 52 clipboard write, an OSC 8 link, a
// screen clear, a bare CR that would overwrite the line, the one-character C1 CSI); the real `berth`
// prints the answer, the job, the session's transcript and the JSON answer. Its bytes are captured as
// written (pipes), and once on a real terminal (tmux, with the pane's raw output recorded): the raw
// sequences never appear, their visible form (terminal-text.ts) does.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { Terminal, until } from '../support/terminal.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const BERTH = join(REPO, 'node_modules/.bin/berth');

// printf's escapes (octal for the UTF-8 bytes of U+009B), run by the engine's Bash tool.
const HOSTILE_COMMAND = String.raw`printf 'A\033]52;c;SGVsbG8=\aB\033]8;;https://evil.test\aC\033[2J\033[HD\rFORGED\302\2332JE\n'`;
/** What the tool prints, as raw characters, and each piece as berth must show it. */
const RAW = ['\x1b]52;c;SGVsbG8=\x07', '\x1b]8;;https://evil.test\x07', '\x1b[2J', '\x1b[H', 'D\rFORGED', '\u009b'];
const SHOWN = ['A^[]52;c;SGVsbG8=^GB', '^[]8;;https://evil.test^GC', '^[[2J^[[HD^MFORGED', '\\u009b2JE'];

/** Whether any character a terminal acts on (C0 but newline and tab, DEL, C1) is in `text`. */
function actedOn(text: string): string[] {
  return [...new Set([...text].filter((c) => /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(c)))].map((c) => `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function assertSafe(what: string, written: string): void {
  for (const raw of RAW) assert.ok(!written.includes(raw), `${what} wrote ${JSON.stringify(raw)} raw: ${JSON.stringify(written)}`);
  assert.deepEqual(actedOn(written), [], `${what}: ${JSON.stringify(written)}`);
}

describe('what berth prints from a hostile container', { timeout: 180_000 }, () => {
  let t: TestBerth;
  let dir: string;

  /** Runs berth with its stdout and stderr as pipes; answers the bytes written, decoded as UTF-8. */
  function berth(args: string[]): Promise<{ stdout: string; stderr: string; code: number | null }> {
    return new Promise((done, fail) => {
      const child = spawn(BERTH, args, { cwd: REPO, env: { ...process.env, BERTH_URL: t.url, BERTH_CONFIG_DIR: join(dir, 'config'), NO_COLOR: '' } });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
      child.on('error', fail);
      child.on('close', (code) => done({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), code }));
    });
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-test-cli-safety-'));
    t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });

  after(async () => {
    await t?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('the answer, the session transcript and the JSON answer show the sequences instead of sending them', async () => {
    const streamed = await berth(['run', `run: ${HOSTILE_COMMAND}`]);
    assert.equal(streamed.code, 0, streamed.stderr);
    assertSafe('berth run (streamed)', streamed.stdout + streamed.stderr);
    for (const shown of SHOWN) assert.ok(streamed.stdout.includes(shown), `berth run shows ${shown}: ${JSON.stringify(streamed.stdout)}`);

    const json = await berth(['run', '--json', `run: ${HOSTILE_COMMAND}`]);
    assert.equal(json.code, 0, json.stderr);
    assertSafe('berth run --json', json.stdout);
    const answer = JSON.parse(json.stdout);
    for (const raw of RAW) assert.ok(answer.output.includes(raw), `the JSON still carries exactly what the server sent: ${JSON.stringify(answer.output)}`);

    const transcript = await berth(['sessions', 'show', answer.session_id]);
    assert.equal(transcript.code, 0, transcript.stderr);
    assertSafe('berth sessions show', transcript.stdout);
    assert.ok(transcript.stdout.includes('^[]52;c;SGVsbG8=^G'), transcript.stdout);

    const queued = await berth(['run', '--async', `run: ${HOSTILE_COMMAND}`]);
    assert.equal(queued.code, 0, queued.stderr);
    const job = await berth(['jobs', 'wait', queued.stdout.trim()]);
    assert.equal(job.code, 0, job.stderr);
    assertSafe('berth jobs wait', job.stdout + job.stderr);
    assert.ok(job.stdout.includes('^[]52;c;SGVsbG8=^G'), job.stdout);
  });

  test("a server's error text is shown, not obeyed", async () => {
    // The session id is echoed in the server's 404 text; the CLI must not print it raw.
    const failed = await berth(['sessions', 'show', '\x1b]52;c;SGVsbG8=\x07']);
    assert.equal(failed.code, 1, failed.stderr);
    assertSafe('berth error', failed.stdout + failed.stderr);
    assert.match(failed.stderr, /^berth: session \^\[\]52;c;SGVsbG8=\^G not found \(HTTP 404\)$/m);
  });

  test('on a real terminal, the raw bytes the pane receives hold none of the sequences', async () => {
    const pane = join(dir, 'pane.bytes');
    const terminal = await Terminal.open(join(dir, 'tmux.sock'), {
      cwd: REPO,
      env: { BERTH_URL: t.url, BERTH_CONFIG_DIR: join(dir, 'config') },
      path: join(REPO, 'node_modules/.bin'),
    });
    try {
      // Everything the pane's programs write from here on, byte for byte, before the terminal interprets it.
      await exec('tmux', ['-S', join(dir, 'tmux.sock'), 'pipe-pane', '-o', '-t', 'cli', `cat >> ${pane}`]);
      const run = await terminal.run(`berth run "run: ${HOSTILE_COMMAND}"`, 60_000);
      assert.equal(run.code, 0, run.output);
      const bytes = await until(async () => {
        const text = await readFile(pane, 'utf8').catch(() => '');
        return text.includes('FORGED') && text.includes('<<end') ? text : undefined;
      }, 10_000, async () => 'the pane recorded nothing');
      for (const raw of RAW) assert.ok(!bytes.includes(raw), `the terminal received ${JSON.stringify(raw)}: ${JSON.stringify(bytes)}`);
      assert.ok(bytes.includes('^[]52;c;SGVsbG8=^G'), JSON.stringify(bytes));
      assert.match(run.output, /\^\[\]52;c;SGVsbG8=\^GB/);
      assert.match(run.output, /\^MFORGED/, 'the bare CR did not overwrite the line');
    } finally {
      await terminal.close();
    }
  });
});
