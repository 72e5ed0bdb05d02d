// The host commands of runs' and workspaces' disks (mount, umount, mkfs.ext4), run by a few long-lived
// /bin/sh helpers instead of being spawned from Berth's own process. Spawning copies the spawner's page
// tables: from Berth (a few hundred MB resident) one `mount` cost 7–15 ms of CPU, from a small shell about
// 1 ms; a pooled run binds its workspace on its answer's path, and every run's tear-down unmounts.
//
// Protocol, one request at a time per helper: Berth writes the argument count and then each argument on a
// line of its own; the shell runs them as one command (no shell parsing: "$@"), with stdin from /dev/null,
// and answers `<exit code> <byte length>` and the command's output (stdout and stderr together). An argument
// with a newline or NUL cannot travel that way and is spawned as before.
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { promisify } from 'node:util';

const spawnedDirectly = promisify(execFile);

const HELPER_SCRIPT = `
while IFS= read -r count; do
  set --
  i=0
  while [ "$i" -lt "$count" ]; do
    IFS= read -r arg || exit 0
    set -- "$@" "$arg"
    i=$((i + 1))
  done
  out=$("$@" 2>&1 </dev/null)
  rc=$?
  printf '%s %s\\n%s\\n' "$rc" "\${#out}" "$out"
done
`;

/** Helpers at most: commands that take long (mkfs) do not hold up quick ones (a bind on a run's path). */
const MAX_HELPERS = 3;

export interface HostCommandOutput {
  readonly stdout: string;
  readonly stderr: string;
}

/** A failed command, shaped as execFile's error (code, stdout, stderr) for callers that look at them. */
export class HostCommandError extends Error {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  constructor(command: readonly string[], code: number, output: string) {
    super(`Command failed: ${command.join(' ')}\n${output}`);
    this.code = code;
    this.stdout = output;
    this.stderr = output;
  }
}

interface Pending {
  resolve(answer: { code: number; output: string }): void;
  reject(error: Error): void;
}

class ShellHelper {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffered: Buffer = Buffer.alloc(0);
  private pending: Pending | undefined;
  /** Taken by a caller that has not sent its command yet. */
  private taken = false;
  private gone: Error | undefined;

  constructor(onExit: (helper: ShellHelper) => void) {
    // Its own process group: a terminal's Ctrl-C reaches Berth, which still unmounts at its stop through
    // this helper. Berth killed, the helper reads the end of its input and exits.
    // LC_ALL=C: the shell counts the output's length in bytes (bash would count characters otherwise).
    this.child = spawn('/bin/sh', ['-c', HELPER_SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: { ...process.env, LC_ALL: 'C' } });
    this.child.stdout.on('data', (chunk: Buffer) => this.read(chunk));
    this.child.stderr.resume();
    const end = (error: Error) => {
      this.gone ??= error;
      this.pending?.reject(error);
      this.pending = undefined;
      onExit(this);
    };
    this.child.on('error', end);
    this.child.on('exit', (code, signal) => end(new Error(`the host command helper exited (${signal ?? `code ${code}`})`)));
    this.child.stdin.on('error', () => undefined);
    this.idle();
  }

  /** Takes the helper for one command if it is free (synchronously: two callers never get the same one). */
  take(): boolean {
    if (this.gone !== undefined || this.pending !== undefined || this.taken) return false;
    this.taken = true;
    return true;
  }

  run(command: readonly string[]): Promise<{ code: number; output: string }> {
    return new Promise((resolve, reject) => {
      this.taken = false;
      if (this.gone) return reject(this.gone);
      this.pending = { resolve, reject };
      this.busy();
      this.child.stdin.write(`${command.length}\n${command.join('\n')}\n`);
    });
  }

  stop(): void {
    this.child.stdin.end();
  }

  private read(chunk: Buffer): void {
    this.buffered = this.buffered.length > 0 ? Buffer.concat([this.buffered, chunk]) : chunk;
    const headerEnd = this.buffered.indexOf(0x0a);
    if (headerEnd < 0) return;
    const [code, length] = this.buffered.subarray(0, headerEnd).toString('latin1').split(' ').map(Number);
    const end = headerEnd + 1 + length! + 1;
    if (this.buffered.length < end) return;
    const output = this.buffered.subarray(headerEnd + 1, end - 1).toString('utf8');
    this.buffered = this.buffered.subarray(end);
    const pending = this.pending;
    this.pending = undefined;
    this.idle();
    pending?.resolve({ code: code!, output });
  }

  // An idle helper does not keep Berth's process alive; one running a command does.
  private idle(): void {
    this.child.unref();
    (this.child.stdout as unknown as { unref(): void }).unref();
    (this.child.stdin as unknown as { unref(): void }).unref();
    (this.child.stderr as unknown as { unref(): void }).unref();
  }

  private busy(): void {
    this.child.ref();
    (this.child.stdout as unknown as { ref(): void }).ref();
  }
}

const helpers: ShellHelper[] = [];
const waiting: Array<() => void> = [];

async function helper(): Promise<ShellHelper> {
  for (;;) {
    const free = helpers.find((candidate) => candidate.take());
    if (free) return free;
    if (helpers.length < MAX_HELPERS) {
      const started = new ShellHelper((exited) => {
        const index = helpers.indexOf(exited);
        if (index >= 0) helpers.splice(index, 1);
        waiting.shift()?.();
      });
      helpers.push(started);
      started.take();
      return started;
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
}

/** Runs `file` with `args` on the host, as execFile would (rejects with the output when it fails). */
export async function runHostCommand(file: string, args: readonly string[]): Promise<HostCommandOutput> {
  const command = [file, ...args];
  if (command.some((part) => part.includes('\n') || part.includes('\0'))) return spawnedDirectly(file, [...args]);
  const runner = await helper();
  let answer: { code: number; output: string };
  try {
    answer = await runner.run(command);
  } finally {
    waiting.shift()?.();
  }
  if (answer.code !== 0) throw new HostCommandError(command, answer.code, answer.output);
  return { stdout: answer.output, stderr: answer.output };
}

/** Ends the helpers (they exit once their command, if any, is done); later commands start new ones. */
export function stopHostCommandHelpers(): void {
  for (const running of helpers.splice(0)) running.stop();
}
