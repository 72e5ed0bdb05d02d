// Host directories holding each run's input files, one per run or agent id, bind-mounted read-only at
// INPUT_DIR and removed when the run ends. They live under the sessions directory so that one host path
// mapping (SERVICE_AGENT_SESSIONS_HOST_DIR) serves both when Berth itself runs in a container.
import { execFile } from 'node:child_process';
import { chmod, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const INPUTS_DIR = '.inputs';

export interface InputFileContent {
  readonly name: string;
  readonly content: string;
}

export class RunInputs {
  private readonly dir: string;
  private readonly hostDir: string;

  constructor(sessionsDir: string, sessionsHostDir: string) {
    this.dir = join(sessionsDir, INPUTS_DIR);
    this.hostDir = join(sessionsHostDir, INPUTS_DIR);
  }

  /** Input directories of runs cut off by a crash are worthless: removed at start, but those of `liveRuns`. */
  async init(liveRuns: ReadonlySet<string> = new Set()): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o711 });
    for (const name of await readdir(this.dir)) {
      if (!liveRuns.has(name)) await rm(join(this.dir, name), { recursive: true, force: true });
    }
  }

  /** The path to mount for this id, as the container runtime sees the host. */
  hostPathOf(id: string): string {
    return join(this.hostDir, id);
  }

  async write(id: string, files: readonly InputFileContent[]): Promise<void> {
    const dir = join(this.dir, id);
    await mkdir(dir, { mode: 0o755 });
    // Modes are set explicitly: the container's user must read these whatever umask Berth was started
    // with (`umask 077` would make them 0400, root's only, and every run would fail to read its prompt).
    await chmod(dir, 0o755);
    for (const file of files) {
      const path = join(dir, file.name);
      await writeFile(path, file.content, { mode: 0o444, flag: 'wx' });
      await chmod(path, 0o444);
    }
  }

  /** Adds files to an id's existing directory (a pooled engine gets its title when it is claimed). */
  async add(id: string, files: readonly InputFileContent[]): Promise<void> {
    for (const file of files) {
      const path = join(this.dir, id, file.name);
      await writeFile(path, file.content, { mode: 0o444, flag: 'wx' });
      await chmod(path, 0o444);
    }
  }

  /**
   * Creates a FIFO in an id's directory (a persistent agent's turns: engine/layout.ts AGENT_INPUT_FIFO) and
   * returns Berth's path of it. Mode 0666 so that the container's user, whatever it maps to, can open it;
   * the directories above it cannot be listed (0711), so only who knows the agent's id finds it.
   */
  async createFifo(id: string, name: string): Promise<string> {
    const path = join(this.dir, id, name);
    // Node has no mkfifo(); coreutils' does it with an explicit mode, whatever Berth's umask.
    await promisify(execFile)('mkfifo', ['-m', '0666', path]);
    return path;
  }

  /** Berth's path of a file in an id's directory. */
  pathOf(id: string, name: string): string {
    return join(this.dir, id, name);
  }

  async remove(id: string): Promise<void> {
    await rm(join(this.dir, id), { recursive: true, force: true });
  }
}
