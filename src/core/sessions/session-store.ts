// Session directories on disk: one per session id under SERVICE_AGENT_SESSIONS_DIR, holding the engine's
// own config directory (transcripts, settings). A run mounts exactly one of them, read-write.
// Every path is built from an id that passed UUID_PATTERN first: `../../etc` never reaches the filesystem.
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, mkdir, open, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { errors } from '../../errors.js';
import type { SessionIntent } from '../run-plan.js';
import type { EngineSession } from '../../engine/command.js';
import { transcriptFiles } from '../../engine/transcript.js';
import { copyTree, isDirectory, pathExists, removeForeignTranscripts } from './session-files.js';
import { checkSessionUuid, UUID_PATTERN } from './session-id.js';

export { checkSessionUuid, UUID_PATTERN };

const EPHEMERAL_DIR = '.ephemeral';
/** A session directory holding this file belongs to a persistent agent: not listed, its transcript not served. */
export const HIDDEN_MARKER = '.berth-agent';

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

/** A listed session directory. */
export interface StoredSession {
  readonly id: string;
  readonly dir: string;
  /** When the engine last wrote its transcript (the directory's time while it has none). */
  readonly lastActivityMs: number;
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
    return join(this.dir, checkSessionUuid(sessionId));
  }

  async exists(sessionId: string): Promise<boolean> {
    return isDirectory(this.pathOf(sessionId));
  }

  /** Whether the session exists and is not a persistent agent's. */
  async isVisible(sessionId: string): Promise<boolean> {
    const dir = this.pathOf(sessionId);
    return (await isDirectory(dir)) && !(await pathExists(join(dir, HIDDEN_MARKER)));
  }

  /** Marks a session as a persistent agent's (the agents service calls this for the sessions it owns). */
  async hide(sessionId: string): Promise<void> {
    // O_NOFOLLOW: the directory is writable from the container; a planted link must not be followed.
    const marker = await open(join(this.pathOf(sessionId), HIDDEN_MARKER), constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
    await marker.close();
  }

  isBusy(sessionId: string): boolean {
    return this.busy.has(checkSessionUuid(sessionId));
  }

  /**
   * Creates or finds the directory for a run and marks the session busy until release(). A second run
   * on a busy session is refused with 409 rather than queued: two engines writing one transcript corrupt it,
   * and a caller that retries knows its turn order, which a queue would hide.
   */
  async prepare(intent: SessionIntent, workdir: string, presetId?: string): Promise<PreparedSession> {
    switch (intent.kind) {
      case 'new':
        return this.createNew(presetId);
      case 'resume':
        return this.claimExisting(checkSessionUuid(intent.sessionId));
      case 'continue': {
        const latest = await this.latestForWorkdir(workdir);
        return latest === undefined ? this.createNew(presetId) : this.claimExisting(latest);
      }
      case 'fork':
        return this.fork(checkSessionUuid(intent.fromSessionId), presetId);
      case 'ephemeral': {
        const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
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

  /** The visible session whose transcript for this workdir was written last, if any. */
  async latestForWorkdir(workdir: string): Promise<string | undefined> {
    const project = projectDirName(workdir);
    let best: { id: string; mtime: number } | undefined;
    for (const id of await this.sessionIds()) {
      try {
        const info = await stat(join(this.dir, id, 'projects', project, `${id}.jsonl`));
        if ((!best || info.mtimeMs > best.mtime) && !(await pathExists(join(this.dir, id, HIDDEN_MARKER)))) {
          best = { id, mtime: info.mtimeMs };
        }
      } catch {
        // No transcript of this session for this workdir.
      }
    }
    return best?.id;
  }

  /** Visible sessions, most recently active first. */
  async list(): Promise<StoredSession[]> {
    const sessions: StoredSession[] = [];
    for (const id of await this.sessionIds()) {
      const dir = join(this.dir, id);
      try {
        if (await pathExists(join(dir, HIDDEN_MARKER))) continue;
        const files = await transcriptFiles(dir, id);
        let lastActivityMs = files.length === 0 ? (await stat(dir)).mtimeMs : 0;
        for (const file of files) lastActivityMs = Math.max(lastActivityMs, (await stat(file)).mtimeMs);
        sessions.push({ id, dir, lastActivityMs });
      } catch (error) {
        // Deleted while being listed.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    return sessions.sort((a, b) => b.lastActivityMs - a.lastActivityMs || a.id.localeCompare(b.id));
  }

  /** Deletes a visible session's directory: 404 when there is none, 409 while a run or agent uses it. */
  async remove(sessionId: string, teardown?: (sessionId: string) => Promise<void>): Promise<void> {
    const id = checkSessionUuid(sessionId);
    if (!(await this.isVisible(id))) throw errors.sessionNotFound(id);
    // Held while deleting, so no run can claim the directory half-way through.
    this.lock(id);
    try {
      await teardown?.(id);
      await rm(join(this.dir, id), { recursive: true, force: true });
    } finally {
      this.busy.delete(id);
    }
  }

  private async sessionIds(): Promise<string[]> {
    const entries = await readdir(this.dir, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory() && UUID_PATTERN.test(entry.name)).map((entry) => entry.name);
  }

  private async createNew(presetId: string | undefined): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    this.lock(sessionId);
    try {
      await this.createDir(sessionId);
    } catch (error) {
      this.busy.delete(sessionId);
      throw error;
    }
    return this.claimed(sessionId, { kind: 'new', sessionId }, true);
  }

  private async claimExisting(sessionId: string): Promise<PreparedSession> {
    // Locked before the existence check: a concurrent DELETE either finished (404 here) or is refused.
    this.lock(sessionId);
    try {
      if (!(await isDirectory(join(this.dir, sessionId)))) throw errors.sessionNotFound(sessionId);
    } catch (error) {
      this.busy.delete(sessionId);
      throw error;
    }
    return this.claimed(sessionId, { kind: 'resume', sessionId }, false);
  }

  private async fork(from: string, presetId: string | undefined): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    // The fork gets a copy of the original's files, so the original's directory is never mounted (and so
    // never written) by the forked run. The original is locked while it is copied: a run writing it
    // meanwhile would leave a half-written line in the copy.
    this.lock(from);
    try {
      if (!(await isDirectory(join(this.dir, from)))) throw errors.sessionNotFound(from);
      this.lock(sessionId);
      const copy = join(this.dir, sessionId);
      try {
        if (await pathExists(copy)) throw errors.internal(`session directory ${sessionId} already exists`);
        try {
          await copyTree(join(this.dir, from), copy);
          await rm(join(copy, HIDDEN_MARKER), { force: true });
          await chmod(copy, 0o777);
        } catch (error) {
          await rm(copy, { recursive: true, force: true });
          throw error;
        }
      } catch (error) {
        this.busy.delete(sessionId);
        throw error;
      }
    } finally {
      this.busy.delete(from);
    }
    return this.claimed(sessionId, { kind: 'fork', fromSessionId: from, sessionId }, true);
  }

  private async createDir(sessionId: string): Promise<void> {
    const dir = join(this.dir, sessionId);
    await mkdir(dir, { mode: 0o777 });
    // The engine runs as the image's user (uid 1000 in the default image, anything in others): the
    // directory must be writable by it. The parent directory is 0700, so only Berth can reach it.
    await chmod(dir, 0o777);
  }

  private lock(sessionId: string): void {
    if (this.busy.has(sessionId)) throw errors.sessionBusy(sessionId);
    this.busy.add(sessionId);
  }

  /**
   * A session taken by a run. A session this run created (new, fork) that ends without a transcript of its
   * own (the run failed before the engine wrote one) is removed again, and a fork drops the copy of its
   * original's transcript, which the engine has copied into the fork's own.
   */
  private claimed(sessionId: string, engineSession: EngineSession, created: boolean): PreparedSession {
    const dir = join(this.dir, sessionId);
    return {
      sessionId,
      engineSession,
      mountPath: join(this.hostDir, sessionId),
      persistent: true,
      release: async () => {
        try {
          if (created) {
            if ((await transcriptFiles(dir, sessionId)).length === 0) await rm(dir, { recursive: true, force: true });
            else if (engineSession.kind === 'fork') await removeForeignTranscripts(dir, sessionId);
          }
        } finally {
          this.busy.delete(sessionId);
        }
      },
    };
  }
}
