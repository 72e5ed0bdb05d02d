// Session directories on disk: one per session id under SERVICE_AGENT_SESSIONS_DIR, holding the engine's
// own config directory (transcripts, settings). A run mounts exactly one of them, read-write.
import { randomUUID } from 'node:crypto';
import { chmod, cp, mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { errors } from '../../errors.js';
import type { SessionIntent } from '../run-plan.js';
import type { EngineSession } from '../../engine/command.js';

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EPHEMERAL_DIR = '.ephemeral';

/** The engine names a project directory after its cwd with every non-alphanumeric character replaced by '-'. */
export function projectDirName(cwd: string): string {
  return cwd.replace(/[^A-Za-z0-9]/g, '-');
}

/** A session directory prepared for one run, with what to undo when the run ends. */
export interface PreparedSession {
  readonly sessionId: string;
  readonly engineSession: EngineSession;
  /** Host path to mount as the engine's config directory (SERVICE_AGENT_SESSIONS_HOST_DIR based). */
  readonly mountPath: string;
  /** Whether the session outlives the run (false for no_persistence). */
  readonly persistent: boolean;
  release(): Promise<void>;
}

export class SessionStore {
  private readonly busy = new Set<string>();

  constructor(
    readonly dir: string,
    private readonly hostDir: string,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    // Ephemeral directories of runs that were cut off by a crash hold nothing anyone can reach.
    await rm(join(this.dir, EPHEMERAL_DIR), { recursive: true, force: true });
  }

  pathOf(sessionId: string): string {
    if (!UUID_PATTERN.test(sessionId)) throw errors.invalid(`session id "${sessionId}" is not a UUID`);
    return join(this.dir, sessionId.toLowerCase());
  }

  async exists(sessionId: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(sessionId))).isDirectory();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  }

  isBusy(sessionId: string): boolean {
    return this.busy.has(sessionId.toLowerCase());
  }

  /**
   * Creates or finds the directory for a run and marks the session busy until release(). A second run
   * on a busy session is refused with 409 rather than queued: two engines writing one transcript corrupt it,
   * and a caller that retries knows its turn order, which a queue would hide.
   */
  async prepare(intent: SessionIntent, workdir: string, presetId?: string): Promise<PreparedSession> {
    switch (intent.kind) {
      case 'new': {
        const sessionId = presetId ?? randomUUID();
        await this.createDir(sessionId);
        return this.claim(sessionId, { kind: 'new', sessionId }, true);
      }
      case 'resume': {
        const sessionId = intent.sessionId.toLowerCase();
        if (!(await this.exists(sessionId))) throw errors.sessionNotFound(sessionId);
        return this.claim(sessionId, { kind: 'resume', sessionId }, true);
      }
      case 'continue': {
        const latest = await this.latestForWorkdir(workdir);
        if (latest === undefined) {
          const sessionId = presetId ?? randomUUID();
          await this.createDir(sessionId);
          return this.claim(sessionId, { kind: 'new', sessionId }, true);
        }
        return this.claim(latest, { kind: 'resume', sessionId: latest }, true);
      }
      case 'fork': {
        const from = intent.fromSessionId.toLowerCase();
        if (!(await this.exists(from))) throw errors.sessionNotFound(from);
        const sessionId = presetId ?? randomUUID();
        // The fork gets a copy of the original's files, so the original's directory is never mounted
        // (and so never written) by the forked run.
        this.lock(from);
        try {
          await cp(this.pathOf(from), this.pathOf(sessionId), { recursive: true, errorOnExist: true, force: false });
        } finally {
          this.busy.delete(from);
        }
        return this.claim(sessionId, { kind: 'fork', fromSessionId: from, sessionId }, true);
      }
      case 'ephemeral': {
        const sessionId = presetId ?? randomUUID();
        const dir = join(this.dir, EPHEMERAL_DIR, sessionId);
        await mkdir(dir, { recursive: true, mode: 0o777 });
        await chmod(dir, 0o777);
        return {
          sessionId,
          engineSession: { kind: 'ephemeral', sessionId },
          mountPath: join(this.hostDir, EPHEMERAL_DIR, sessionId),
          persistent: false,
          release: async () => {
            await rm(dir, { recursive: true, force: true });
          },
        };
      }
    }
  }

  /** The session whose transcript for this workdir was written last, if any. */
  async latestForWorkdir(workdir: string): Promise<string | undefined> {
    const project = projectDirName(workdir);
    let best: { id: string; mtime: number } | undefined;
    for (const entry of await readdir(this.dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || !UUID_PATTERN.test(entry.name)) continue;
      try {
        const info = await stat(join(this.dir, entry.name, 'projects', project, `${entry.name}.jsonl`));
        if (!best || info.mtimeMs > best.mtime) best = { id: entry.name, mtime: info.mtimeMs };
      } catch {
        // No transcript of this session for this workdir.
      }
    }
    return best?.id;
  }

  private async createDir(sessionId: string): Promise<void> {
    const dir = this.pathOf(sessionId);
    await mkdir(dir, { mode: 0o777 });
    // The engine runs as the image's user (uid 1000 in the default image, anything in others): the
    // directory must be writable by it. The parent directory is 0700, so only Berth can reach it.
    await chmod(dir, 0o777);
  }

  private lock(sessionId: string): void {
    if (this.busy.has(sessionId)) throw errors.sessionBusy(sessionId);
    this.busy.add(sessionId);
  }

  private claim(sessionId: string, engineSession: EngineSession, persistent: boolean): PreparedSession {
    this.lock(sessionId);
    return {
      sessionId,
      engineSession,
      mountPath: join(this.hostDir, sessionId),
      persistent,
      release: async () => {
        this.busy.delete(sessionId);
      },
    };
  }
}
