// The berth command end to end, in a real terminal: tmux runs bash, the test types what a user would type
// (the API token at a hidden prompt, chat turns, Ctrl-C, Ctrl-D) and reads what the screen shows. The
// Berth behind it is real (Podman, the engine, the offline model) with authentication on; a second one
// without authentication checks that the CLI needs no login there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { podman, startTestRegistry, type TestRegistry } from '../support/registry.js';
import { Terminal, until } from '../support/terminal.js';

const REPO = resolve(import.meta.dirname, '../..');

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as { port: number };
  await new Promise((closed) => server.close(closed));
  return port;
}

describe('the berth command in a terminal', { timeout: 180_000 }, () => {
  const apiToken = randomBytes(24).toString('hex');
  let t: TestBerth;
  let open: TestBerth;
  let registry: TestRegistry;
  let pulled: string;
  let dir: string;
  let configDir: string;
  let terminal: Terminal;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-test-cli-'));
    configDir = join(dir, 'config');
    registry = await startTestRegistry();
    await registry.push('localhost/berth-test-musl:latest', 'cli/musl:1');
    pulled = `${registry.host}/cli/musl:1`;
    [t, open] = await Promise.all([
      startTestBerth({
        SERVICE_AUTH_ENABLED: 'true',
        SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
        SERVICE_API_TOKENS: apiToken,
        // Access tokens this short expire between commands, so the tokens the CLI stored are refreshed often.
        SERVICE_JWT_EXPIRY: '4s',
        SERVICE_IMAGE_INSECURE_REGISTRIES: registry.host,
        SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: `localhost/*,${registry.host}/cli/*`,
      }),
      startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }),
    ]);
    terminal = await Terminal.open(join(dir, 'tmux.sock'), {
      cwd: REPO,
      env: { BERTH_URL: t.url, BERTH_CONFIG_DIR: configDir, NO_COLOR: '1' },
      path: join(REPO, 'node_modules/.bin'),
    });
  });

  after(async () => {
    await terminal?.close();
    await Promise.all([t?.stop(), open?.stop()]);
    // The pulled reference is an extra tag of the musl test image: removing it untags, the image stays.
    if (pulled) await podman('rmi', pulled).catch(() => undefined);
    await registry?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('berth login asks for the API token without echoing it and keeps the tokens in a private file', async () => {
    const login = await terminal.start('berth login');
    await login.shows(/^API token:$/m);
    await terminal.type(apiToken);
    await terminal.press('Enter');
    const { output, code } = await login.finished();
    assert.equal(code, 0, output);
    assert.match(output, new RegExp(`logged in to:\\s+${t.url}`));
    // A bare API token: the caller is that token's fingerprint identity, not a client_id shared by every CLI user.
    assert.match(output, /^as:\s+token:[0-9a-f]{12}$/m);
    assert.ok(!(await terminal.screen()).includes(apiToken), 'the API token never appears on the screen');
    const file = join(configDir, 'credentials.json');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const stored = JSON.parse(await readFile(file, 'utf8'));
    assert.match(stored.servers[t.url].access_token, /^eyJ/);
    assert.match(stored.servers[t.url].refresh_token, /^eyJ/);
  });

  test('a command refreshes an expired access token and saves the rotated pair back', async () => {
    const file = join(configDir, 'credentials.json');
    const before = JSON.parse(await readFile(file, 'utf8')).servers[t.url];
    await delay(Math.max(0, before.expires_at - Date.now()) + 300);
    const { output, code } = await terminal.run('berth sessions ls');
    assert.equal(code, 0, output);
    const after = JSON.parse(await readFile(file, 'utf8')).servers[t.url];
    assert.notEqual(after.access_token, before.access_token);
    assert.notEqual(after.refresh_token, before.refresh_token);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const reused = await t.request('POST', '/auth/refresh', { refresh_token: before.refresh_token });
    assert.equal(reused.status, 401, 'the old refresh token was used up by the refresh');
  });

  test('berth run prints the answer as it streams; --json prints the whole answer', async () => {
    const streamed = await terminal.run('berth run "say: hi"');
    assert.equal(streamed.code, 0, streamed.output);
    const [answerLine, hint] = streamed.output.split('\n');
    assert.equal(answerLine, 'hi');
    assert.match(hint!, /^session [0-9a-f-]{36} · continue it with: berth run --resume [0-9a-f-]{36} "…"$/, 'on a terminal, how to go on');

    const json = await terminal.run('berth run --json "say: as json"');
    assert.equal(json.code, 0, json.output);
    const answer = JSON.parse(json.output);
    assert.equal(answer.status, 'completed');
    assert.equal(answer.output, 'as json');
    assert.match(answer.session_id, /^[0-9a-f-]{36}$/);

    const resumed = await terminal.run(`berth run --resume ${answer.session_id} "recall:"`);
    assert.equal(resumed.code, 0, resumed.output);
    assert.equal(resumed.output.split('\n')[0], 'say: as json', 'the resumed session remembers its first prompt');
  });

  test('berth run --async prints a job id; jobs wait shows it completed; jobs ls --output json lists it', async () => {
    const queued = await terminal.run('berth run --async "say: later"');
    assert.equal(queued.code, 0, queued.output);
    const [jobId, hint] = queued.output.split('\n');
    assert.match(jobId!, /^job-[0-9a-f-]{36}$/);
    assert.equal(hint, `follow it with: berth jobs wait ${jobId}`);

    const waited = await terminal.run(`berth jobs wait ${jobId}`);
    assert.equal(waited.code, 0, waited.output);
    assert.match(waited.output, /^status:\s+completed$/m);
    assert.match(waited.output, /^later$/m);

    const listed = await terminal.run('berth jobs ls --output json');
    assert.equal(listed.code, 0, listed.output);
    const job = JSON.parse(listed.output).jobs.find((j: { id: string }) => j.id === jobId);
    assert.equal(job?.status, 'completed');
  });

  test('berth jobs wait shows status and elapsed time; Ctrl-C stops waiting, jobs cancel stops the job', async () => {
    const queued = await terminal.run('berth run --async "run: /bin/sleep 20"');
    const jobId = queued.output.split('\n')[0]!;
    assert.match(jobId, /^job-/);
    const wait = await terminal.start(`berth jobs wait ${jobId}`);
    await wait.shows(new RegExp(`${jobId} running \\(\\d+s\\)$`));
    await terminal.press('C-c');
    const stopped = await wait.finished();
    assert.equal(stopped.code, 130, stopped.output);
    assert.equal(stopped.output, `stopped waiting; ${jobId} keeps running (cancel it with: berth jobs cancel ${jobId})`);
    // The job still runs: its container shows as a run's (a claimed pooled engine takes its run's name up to
    // a second after its claim; until then it is listed as the pool's).
    await until(async () => ((await t.leftovers()).length > 0 ? true : undefined), 10_000, async () => 'the job\'s container is not listed as a run\'s');

    const cancelled = await terminal.run(`berth jobs cancel ${jobId}`);
    assert.equal(cancelled.code, 0, cancelled.output);
    assert.match(cancelled.output, /^status:\s+cancelled$/m);
    await until(async () => ((await t.leftovers()).length === 0 ? true : undefined), 15_000, async () => `containers left: ${await t.leftovers()}`);
  });

  test('berth sessions ls lists sessions by title; sessions show prints the transcript', async () => {
    const listed = await terminal.run('berth sessions ls');
    assert.equal(listed.code, 0, listed.output);
    assert.match(listed.output, /^ID\s+TITLE$/m);
    const row = /^([0-9a-f-]{36})\s+say: hi$/m.exec(listed.output);
    assert.ok(row, listed.output);

    const shown = await terminal.run(`berth sessions show ${row[1]}`);
    assert.equal(shown.code, 0, shown.output);
    assert.equal(shown.output, ['user:', '  say: hi', '', 'assistant:', '  hi'].join('\n'));
  });

  test('berth sessions show sets tool calls and their results apart; sessions rm deletes a session', async () => {
    const run = await terminal.run('berth run --json "run: echo from-a-tool"');
    assert.equal(run.code, 0, run.output);
    const sessionId = JSON.parse(run.output).session_id;

    const shown = await terminal.run(`berth sessions show ${sessionId}`);
    assert.equal(shown.code, 0, shown.output);
    assert.match(shown.output, /^user:\n  run: echo from-a-tool\n\nassistant:\n  ⚙ Bash \{"command":"echo from-a-tool"[^\n]*\}\n  ↳ from-a-tool\n  from-a-tool$/);

    const removed = await terminal.run(`berth sessions rm ${sessionId}`);
    assert.equal(removed.code, 0, removed.output);
    assert.equal(removed.output, `deleted:  ${sessionId}`);
    const gone = await terminal.run(`berth sessions show ${sessionId}`);
    assert.equal(gone.code, 1);
    assert.equal(gone.output, `berth: session ${sessionId} not found (HTTP 404)`);
  });

  test('berth agents chat streams each turn, marks its end, remembers earlier turns and leaves on Ctrl-D', async () => {
    const spawned = await terminal.run('berth agents spawn');
    assert.equal(spawned.code, 0, spawned.output);
    const agentId = /^id:\s+(agent-[0-9a-f-]{36})$/m.exec(spawned.output)?.[1];
    assert.ok(agentId, spawned.output);

    const chat = await terminal.start(`berth agents chat ${agentId}`);
    await chat.shows(/^you>$/m);
    await terminal.type('say: the first answer');
    await terminal.press('Enter');
    await chat.shows(/^you> say: the first answer\nthe first answer\n── turn ended ──\nyou>$/m);
    await terminal.type('recall:');
    await terminal.press('Enter');
    await chat.shows(/^you> recall:\nsay: the first answer\n── turn ended ──\nyou>$/m);
    await terminal.press('C-d');
    const { output, code } = await chat.finished();
    assert.equal(code, 0, output);
    assert.match(output, new RegExp(`left the chat; ${agentId} keeps running`));

    const piped = await terminal.run(`printf 'say: piped\\n' | berth agents chat ${agentId}`);
    assert.equal(piped.code, 0, piped.output);
    assert.match(piped.output, /^you> say: piped\npiped\n── turn ended ──\nleft the chat;/m, 'piped input: each line is shown, and the chat ends after its turn');

    const listed = await terminal.run('berth agents ls --output json');
    assert.equal(JSON.parse(listed.output).agents.find((a: { id: string }) => a.id === agentId)?.status, 'idle', 'leaving the chat leaves the agent running');

    const removed = await terminal.run(`berth agents rm ${agentId}`);
    assert.equal(removed.code, 0, removed.output);
    assert.deepEqual(await t.leftovers(), []);
  });

  test('berth images ls shows the agent image with its compatibility rank', async () => {
    const { output, code } = await terminal.run('berth images ls');
    assert.equal(code, 0, output);
    assert.match(output, /^IMAGE\s+ID\s+SIZE\s+RANK\s+ALLOWED$/m);
    assert.match(output, /^localhost\/berth-agent:\S+\s+[0-9a-f]{12}\s+[\d.]+ \w+\s+1 official\s+yes$/m);
  });

  test('berth images search finds, pull shows Podman\'s progress with a bar, show ranks an image', async () => {
    const found = await terminal.run(`berth images search ${registry.host}/cli`);
    assert.equal(found.code, 0, found.output);
    assert.match(found.output, new RegExp(`^${registry.host}/cli/musl\\s+0$`, 'm'));

    const pull = await terminal.run(`berth images pull ${pulled}`);
    assert.equal(pull.code, 0, pull.output);
    assert.match(pull.output, /^Copying blob sha256:[0-9a-f]{64}$/m, 'Podman\'s lines are shown above the bar');
    assert.match(pull.output, new RegExp(`^pulling ${pulled} \\[={30}\\] (\\d+)/\\1 blobs? copied \\d+s$`, 'm'), 'the bar is full and every blob counted once the image is there');
    assert.match(pull.output, new RegExp(`^pulled:\\s+${pulled}$`, 'm'));

    // Not on a terminal: the lines alone, no bar, then --output json's answer; the code is berth's.
    const piped = await terminal.run(`berth images pull ${pulled} --output json 2>&1 | cat; test \${PIPESTATUS[0]} = 0`);
    assert.equal(piped.code, 0, piped.output);
    assert.match(piped.output, /^Copying blob sha256:[0-9a-f]{64}$/m);
    assert.doesNotMatch(piped.output, /^pulling /m);
    const answer = JSON.parse(piped.output.slice(piped.output.indexOf('{'), piped.output.lastIndexOf('}') + 1)) as { success: boolean; image: string; image_id: string };
    assert.deepEqual([answer.success, answer.image], [true, pulled]);
    assert.match(answer.image_id, /^[0-9a-f]{64}$/);

    const shown = await terminal.run(`berth images show ${pulled}`);
    assert.equal(shown.code, 0, shown.output);
    assert.match(shown.output, /^rank:\s+4 incompatible$/m);
    assert.match(shown.output, /^compatible:\s+no \(the engine needs glibc\)$/m);
  });

  test('Ctrl-C during berth run cancels it: exit code 130 and no container left', async () => {
    const run = await terminal.start('berth run "run: /bin/sleep 20"');
    // The run's container exists (the engine is sleeping in it) before the interrupt.
    await until(async () => ((await t.leftovers()).length > 0 ? true : undefined), 30_000, async () => `no run container appeared:\n${await terminal.screen()}`);
    await terminal.press('C-c');
    const { output, code } = await run.finished(15_000);
    assert.equal(code, 130, output);
    assert.match(output, /^cancelled$/m);
    await until(async () => ((await t.leftovers()).length === 0 ? true : undefined), 15_000, async () => `containers left: ${await t.leftovers()}`);
  });

  test('errors say what the server said, with a hint, and exit non-zero', async () => {
    const unknown = await terminal.run('berth jobs get job-00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.code, 1);
    assert.equal(unknown.output, 'berth: job job-00000000-0000-4000-8000-000000000000 not found (HTTP 404)');

    const port = await closedPort();
    const unreachable = await terminal.run(`berth --url http://127.0.0.1:${port} health`);
    assert.equal(unreachable.code, 1);
    assert.equal(unreachable.output, [`berth: cannot reach Berth at http://127.0.0.1:${port} (ECONNREFUSED)`, 'hint: is Berth running? start it with `make up`, or set --url/BERTH_URL'].join('\n'));

    await mkdir(join(dir, 'nobody'));
    const anonymous = await terminal.run(`BERTH_CONFIG_DIR=${join(dir, 'nobody')} berth sessions ls`);
    assert.equal(anonymous.code, 1);
    assert.equal(anonymous.output, ['berth: token required (HTTP 401)', 'hint: run `berth login` (with the same --url) to sign in'].join('\n'));
  });

  test('a Berth without authentication needs no login', async () => {
    const { output, code } = await terminal.run(`BERTH_CONFIG_DIR=${join(dir, 'nobody')} berth --url ${open.url} run "say: open"`);
    assert.equal(code, 0, output);
    assert.equal(output.split('\n')[0], 'open');
  });

  test('berth completion prints scripts built from the command tree; the bash one completes subcommands', async () => {
    const bash = await terminal.run('berth completion bash');
    assert.equal(bash.code, 0);
    for (const word of ['run', 'jobs', 'sessions', 'agents', 'images', 'login', 'logout', 'health', 'version', '/jobs/wait', '/agents/chat', '--output']) {
      assert.ok(bash.output.includes(word), `the bash script mentions ${word}`);
    }
    const completed = await terminal.run('source <(berth completion bash); COMP_WORDS=(berth jobs ""); COMP_CWORD=2; _berth_completion; echo "${COMPREPLY[*]}"');
    assert.equal(completed.output, 'ls get wait cancel');
    const choices = await terminal.run('COMP_WORDS=(berth --output ""); COMP_CWORD=2; _berth_completion; echo "${COMPREPLY[*]}"');
    assert.equal(choices.output, 'table json');

    const zsh = await terminal.run('berth completion zsh');
    assert.equal(zsh.code, 0);
    assert.match(zsh.output, /^#compdef berth$/m);
    assert.match(zsh.output, /'chat:chat with an agent/);
  });

  test('npx berth works from the repository; berth logout revokes and forgets the tokens', async () => {
    const version = await terminal.run('npx berth version');
    assert.equal(version.code, 0, version.output);
    assert.match(version.output, /^berth \(this command\):\s+\d+\.\d+\.\d+/m);
    assert.match(version.output, /^api:\s+1$/m);

    const stored = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')).servers[t.url];
    const logout = await terminal.run('berth logout');
    assert.equal(logout.code, 0, logout.output);
    assert.match(logout.output, /^logged out of:\s+/m);
    assert.equal(JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')).servers[t.url], undefined);
    const revoked = await t.request('POST', '/auth/refresh', { refresh_token: stored.refresh_token });
    assert.equal(revoked.status, 401, 'the stored refresh token no longer works');
    const after = await terminal.run('berth sessions ls');
    assert.equal(after.code, 1);
    assert.match(after.output, /run `berth login`/);
  });
});
