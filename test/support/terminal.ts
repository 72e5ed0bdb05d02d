// A terminal for end-to-end tests of interactive commands: bash in a tmux session with a tmux server of
// its own (on a socket the test chooses, so removing the test's directory removes it), typed into key by
// key and read back as the screen shows it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** A bash in a tmux session of its own (its own tmux server and socket), typed into and read like a screen. */
export class Terminal {
  private commands = 0;

  private constructor(private readonly socket: string) {}

  /** A 200×50 terminal running bash (no rc files, no history file) in `cwd`, with `env` added, and `path` first on its PATH. */
  static async open(socket: string, options: { cwd: string; env: Record<string, string>; path: string }): Promise<Terminal> {
    const terminal = new Terminal(socket);
    await terminal.tmux(['-f', '/dev/null', 'new-session', '-d', '-s', 'cli', '-x', '200', '-y', '50', '-c', options.cwd, 'bash --norc --noprofile -i'], { ...process.env, ...options.env, HISTFILE: '' });
    await terminal.type(`export PS1='$ ' PATH="${options.path}:$PATH"`);
    await terminal.press('Enter');
    return terminal;
  }

  /** Starts a command line; its output is what the screen shows between two markers it prints. */
  async start(command: string): Promise<CommandLine> {
    const n = ++this.commands;
    await this.type(`echo "<<start ${n}>>"; ${command}; echo "<<end ${n} $?>>"`);
    await this.press('Enter');
    return new CommandLine(this, n);
  }

  /** Runs a command line to its end. */
  async run(command: string, timeoutMs = 30_000): Promise<{ output: string; code: number }> {
    return (await this.start(command)).finished(timeoutMs);
  }

  /** Characters, sent as typed (nothing in them is read as a key name). */
  async type(text: string): Promise<void> {
    await this.tmux(['send-keys', '-t', 'cli', '-l', text]);
  }

  /** A key: Enter, C-c, C-d. */
  async press(key: string): Promise<void> {
    await this.tmux(['send-keys', '-t', 'cli', key]);
  }

  /** Everything the terminal has shown, scrollback included, wrapped lines joined. */
  async screen(): Promise<string> {
    return (await this.tmux(['capture-pane', '-p', '-J', '-S', '-', '-t', 'cli'])).split('\n').map((line) => line.trimEnd()).join('\n');
  }

  async close(): Promise<void> {
    await this.tmux(['kill-server']).catch(() => undefined);
  }

  private async tmux(args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
    return (await exec('tmux', ['-S', this.socket, ...args], env ? { env } : {})).stdout;
  }
}

export class CommandLine {
  constructor(
    private readonly terminal: Terminal,
    private readonly n: number,
  ) {}

  /** What the command has printed so far (the lines after its start marker). */
  async output(): Promise<string> {
    const lines = (await this.terminal.screen()).split('\n');
    const start = lines.indexOf(`<<start ${this.n}>>`);
    if (start < 0) return '';
    const end = lines.findIndex((line, i) => i > start && line.startsWith(`<<end ${this.n} `));
    // Lines are right-trimmed (a prompt's trailing space too), and the empty screen below is not output.
    return lines.slice(start + 1, end < 0 ? undefined : end).join('\n').trimEnd();
  }

  /** Waits until the output so far satisfies `expected`; answers that output. */
  async shows(expected: RegExp | ((output: string) => boolean), timeoutMs = 30_000): Promise<string> {
    const check = typeof expected === 'function' ? expected : (output: string) => expected.test(output);
    return until(async () => {
      const output = await this.output();
      return check(output) ? output : undefined;
    }, timeoutMs, async () => `the screen never showed ${expected}:\n${await this.terminal.screen()}`);
  }

  async finished(timeoutMs = 30_000): Promise<{ output: string; code: number }> {
    const code = await until(async () => {
      const match = new RegExp(`^<<end ${this.n} (\\d+)>>$`, 'm').exec(await this.terminal.screen());
      return match ? Number(match[1]) : undefined;
    }, timeoutMs, async () => `command ${this.n} did not end:\n${await this.terminal.screen()}`);
    return { output: await this.output(), code };
  }
}

export async function until<T>(probe: () => Promise<T | undefined>, timeoutMs: number, failure: () => Promise<string>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(await failure());
    await delay(100);
  }
}
